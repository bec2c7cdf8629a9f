"""Showing a split run: the loss curves, the wire log, one step as a sequence diagram, and the
real source of the functions the ranks ran, side by side.

Each function returns a display object (`helpers.display`): a picture or HTML in Jupyter, a
short stable text elsewhere.
"""

from __future__ import annotations

import builtins
import html
import inspect
import io
import keyword
import textwrap
import tokenize
from collections.abc import Callable
from typing import Any

from helpers.display import Figure, Table, drawn_in_language, figure_words
from helpers.language import say
from helpers.shapes import shape_text
from helpers.split_ranks import ROLES, WireRecord

__all__ = ["SourceView", "loss_figure", "sequence_figure", "show_source", "wire_table"]

#: The colours of the two directions, in the sequence diagram and in the code beside it.
FORWARD, BACKWARD = "#1f77b4", "#d62728"
_TINT = {FORWARD: "#e4eef8", BACKWARD: "#f9e3e3"}


def wire_table(records: list[WireRecord], steps: list[int] | None = None) -> Table:
    """What crossed between the ranks: step, phase, direction, what, shape, payload bytes."""
    rows = [
        {
            "step": r.step,
            "phase": r.phase,
            "direction": r.direction,
            "what": r.what,
            "shape": shape_text(r.shape),
            "bytes": r.nbytes,
        }
        for r in records
        if steps is None or r.step in steps
    ]
    total = sum(r.nbytes for r in records)
    shown = (
        ""
        if steps is None
        else say("common", "tables.wire_shown", steps=", ".join(map(str, steps)))
    )
    note = say("common", "tables.wire_note", count=len(records), total=total, shown=shown)
    return Table(["step", "phase", "direction", "what", "shape", "bytes"], rows, note=note)


@drawn_in_language
def loss_figure(single: list[float], distributed: list[float]) -> Figure:
    """Both runs' loss curves in one plot (the distributed one dashed, on top)."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(5.5, 3.2))
    ax = fig.add_subplot()
    steps = range(1, len(single) + 1)
    ax.plot(
        steps, single, "o-", color="#1f77b4", lw=4, alpha=0.45, label=figure_words("one_process")
    )
    ax.plot(
        range(1, len(distributed) + 1),
        distributed,
        "x--",
        color="#d62728",
        lw=1.5,
        label=figure_words("three_processes"),
    )
    ax.set_xlabel(figure_words("training_step"))
    ax.set_ylabel(figure_words("loss"))
    ax.set_title(figure_words("losses_title"))
    ax.grid(alpha=0.3)
    ax.legend()
    return Figure(fig, description=say("common", "figures.losses_description", steps=len(single)))


@drawn_in_language
def sequence_figure(records: list[WireRecord], step: int = 1) -> Figure:
    """One step's messages as a sequence diagram: a lane per rank, an arrow per message."""
    from matplotlib.figure import Figure as MplFigure

    messages = [r for r in records if r.step == step]
    fig = MplFigure(figsize=(8, 0.85 * len(messages) + 1.5))
    ax = fig.add_subplot()
    xs = {rank: 3.4 * rank for rank in ROLES}
    bottom = -len(messages) - 0.4
    for rank, x in xs.items():
        ax.plot([x, x], [0.2, bottom], color="0.7", lw=1, ls="--", zorder=0)
        ax.text(
            x,
            0.35,
            figure_words("lane", rank=rank, role=figure_words(f"role_{rank}")),
            ha="center",
            va="bottom",
            fontsize=10,
            bbox={"boxstyle": "round", "fc": "#eef", "ec": "0.5"},
        )
    for i, r in enumerate(messages, start=1):
        color = FORWARD if r.phase == "forward" else BACKWARD
        ax.annotate(
            "",
            xy=(xs[r.dst], -i),
            xytext=(xs[r.src], -i),
            arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2, "mutation_scale": 16},
        )
        middle = (xs[r.src] + xs[r.dst]) / 2
        kind, _, name = r.what.partition(" ")  # "activation f1", "gradient ff1.grad"
        what = figure_words(kind, name=name) if kind in ("activation", "gradient") else r.what
        ax.text(middle, -i + 0.07, what, ha="center", va="bottom", fontsize=10, color=color)
        ax.text(
            middle,
            -i - 0.07,
            figure_words("message_size", shape=shape_text(r.shape), bytes=r.nbytes),
            ha="center",
            va="top",
            fontsize=9,
            color="0.35",
        )
    ax.set_xlim(-1.7, xs[2] + 1.7)
    ax.set_ylim(bottom, 1.3)
    ax.axis("off")
    ax.set_title(figure_words("sequence_title", step=step), fontsize=11)
    description = say("common", "figures.sequence_description", step=step, messages=len(messages))
    return Figure(fig, description=description)


def _wire_colour(line: str) -> str | None:
    """The arrow colour of a line that sends or receives a message, else None."""
    if "wire.send(" not in line and "wire.recv(" not in line:
        return None
    if '"activation' in line:
        return FORWARD
    return BACKWARD if '"gradient' in line else None


#: Colours of the code's tokens (those of Jupyter's own code cells, roughly).
_TOKEN_STYLE = {
    "keyword": "color: #008000; font-weight: bold",
    "builtin": "color: #008000",
    "defined": "color: #0000ff",
    "string": "color: #ba2121",
    "comment": "color: #3d7b7b; font-style: italic",
    "number": "color: #666666",
}


def _token_kind(token: tokenize.TokenInfo, previous: str) -> str | None:
    """How to colour one token: a key of `_TOKEN_STYLE`, or None for plain."""
    name = tokenize.tok_name[token.type]
    if name == "COMMENT":
        return "comment"
    if name == "NUMBER":
        return "number"
    if name == "STRING" or name.startswith("FSTRING"):  # f-strings are split from Python 3.12
        return "string"
    if name != "NAME":
        return None
    if keyword.iskeyword(token.string):
        return "keyword"
    if previous in ("def", "class"):
        return "defined"
    return "builtin" if token.string in _BUILTINS else None


_BUILTINS = frozenset(dir(builtins))


def _highlighted(source: str) -> list[str]:
    """`source` as HTML, one string per line, its tokens coloured (the standard library's
    `tokenize`: the same HTML on every Python and every machine)."""
    lines = source.splitlines()
    kinds: list[list[str | None]] = [[None] * len(line) for line in lines]
    try:
        previous = ""
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            kind = _token_kind(token, previous)
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT):
                previous = token.string
            if kind is None:
                continue
            (row, col), (end_row, end_col) = token.start, token.end
            for r in range(row - 1, end_row):  # a token may span lines (a docstring)
                first = col if r == row - 1 else 0
                last = end_col if r == end_row - 1 else len(lines[r])
                kinds[r][first:last] = [kind] * (last - first)
    except (tokenize.TokenError, SyntaxError, IndexError):  # not Python: plain text
        kinds = [[None] * len(line) for line in lines]
    html_lines = []
    for line, line_kinds in zip(lines, kinds, strict=True):
        pieces, start = [], 0
        for end in range(1, len(line) + 1):
            if end == len(line) or line_kinds[end] != line_kinds[start]:
                text, kind = html.escape(line[start:end]), line_kinds[start]
                if kind is not None:
                    text = f'<span style="{_TOKEN_STYLE[kind]}">{text}</span>'
                pieces.append(text)
                start = end
        html_lines.append("".join(pieces))
    return html_lines


class SourceView:
    """Source code in columns, side by side (one per function): highlighted HTML in Jupyter,
    plain text elsewhere. Lines that send or receive are tinted like the sequence diagram's
    arrows: forward blue, backward red."""

    def __init__(self, columns: list[tuple[str, str]]) -> None:
        #: (title, source) of each column, left to right.
        self.columns = columns

    def __repr__(self) -> str:
        return "\n\n".join(f"# {title}\n{source.rstrip()}" for title, source in self.columns)

    def _repr_html_(self) -> str:
        boxes = []
        for title, source in self.columns:
            lines = []
            for text, html_line in zip(source.splitlines(), _highlighted(source), strict=True):
                colour = _wire_colour(text)
                style = "display: block"
                if colour is not None:
                    style += f"; background: {_TINT[colour]}; box-shadow: inset 3px 0 {colour}"
                lines.append(f'<span style="{style}">{html_line or " "}</span>')
            boxes.append(
                '<div style="flex: 0 1 auto; min-width: 0; max-width: 100%">'
                f'<div style="font-family: monospace; font-size: 11px; color: #555">'
                f"{html.escape(title)}</div>"
                '<pre style="margin: 0; padding: 6px 8px; background: #f8f8f8; color: #000; '
                'font-family: monospace; font-size: 11px; line-height: 1.4; overflow-x: auto">'
                f"{''.join(lines)}</pre></div>"
            )
        return (
            '<div style="display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start">'
            f"{''.join(boxes)}</div>"
        )


def show_source(*functions: Callable[..., Any]) -> SourceView:
    """The real source of each function (`inspect.getsource`), side by side, left to right."""
    if not functions:
        raise TypeError("show_source needs at least one function, e.g. show_source(client_step)")
    columns = []
    for position, fn in enumerate(functions, start=1):
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
            raise TypeError(
                f"show_source: argument {position} is a {type(fn).__name__}, not a function; "
                "pass the function itself, without calling it"
            )
        path = fn.__module__.replace(".", "/") + ".py"
        columns.append((f"{fn.__qualname__} · {path}", textwrap.dedent(inspect.getsource(fn))))
    return SourceView(columns)
