"""Showing a split run: the loss curves, the wire log, one step as a sequence diagram, and the
real source of the functions the ranks ran, side by side.

Each function returns a display object (`helpers.display`): a picture or HTML in Jupyter, a
short stable text elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers import source
from helpers.display import Figure, Table, drawn_in_language, figure_words
from helpers.language import say
from helpers.ranks.split_ranks import ROLES, WireRecord
from helpers.shapes import shape_text
from helpers.source import SourceView

__all__ = ["loss_figure", "sequence_figure", "show_source", "wire_table", "wire_tint"]

#: The colours of the two directions, in the sequence diagram and in the code beside it.
FORWARD, BACKWARD = "#1f77b4", "#d62728"
_TINT = {FORWARD: "#e4eef8", BACKWARD: "#f9e3e3"}


def _what(what: str, drawn: bool = False) -> str:
    """A message's name ("activation f1", "gradient ff1.grad") in the learner's words, or,
    `drawn`, in the words of the figure's language."""
    kind, _, name = what.partition(" ")
    if kind not in ("activation", "gradient"):
        return what
    return figure_words(kind, name=name) if drawn else say("common", f"figures.{kind}", name=name)


def wire_table(records: list[WireRecord], steps: list[int] | None = None) -> Table:
    """What crossed between the ranks: step, phase, direction, what, shape, payload bytes."""
    rows = [
        {
            "step": r.step,
            "phase": r.phase,
            "direction": r.direction,
            "what": _what(r.what),
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
        what = _what(r.what, drawn=True)
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


def wire_tint(line: str) -> tuple[str, str] | None:
    """How a line of rank code is tinted beside the sequence diagram: a line that sends or
    receives gets its arrow's colour (forward blue, backward red), as (bar, background)."""
    colour = _wire_colour(line)
    return None if colour is None else (colour, _TINT[colour])


def show_source(*functions: Callable[..., Any]) -> SourceView:
    """The real source of each of 07's rank functions, side by side, the lines that send or
    receive tinted like the sequence diagram's arrows (`helpers.source.show_source`)."""
    return source.show_source(*functions, tint=wire_tint)
