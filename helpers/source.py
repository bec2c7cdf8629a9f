"""Real source code shown in a notebook: functions side by side, highlighted, lines tinted.

    show_source(client_step, middle_step)   # inspect.getsource of each, in columns

A notebook shows the code a helper runs for it (07's rank functions, 07b's schedule step, 09c's
compiled code) with this: what the learner reads is what ran.
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

from helpers.naming import a_type

__all__ = ["SourceView", "Tint", "show_source"]

#: How a line is tinted: (bar colour, background colour), or None for a plain line.
Tint = Callable[[str], "tuple[str, str] | None"]


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
    plain text elsewhere. `tint` marks lines (07: those that send or receive, coloured like the
    sequence diagram's arrows)."""

    def __init__(self, columns: list[tuple[str, str]], tint: Tint | None = None) -> None:
        #: (title, source) of each column, left to right.
        self.columns = columns
        self.tint = tint

    def __repr__(self) -> str:
        return "\n\n".join(f"# {title}\n{source.rstrip()}" for title, source in self.columns)

    def _repr_html_(self) -> str:
        boxes = []
        for title, source in self.columns:
            lines = []
            for text, html_line in zip(source.splitlines(), _highlighted(source), strict=True):
                tinted = self.tint(text) if self.tint is not None else None
                style = "display: block"
                if tinted is not None:
                    bar, background = tinted
                    style += f"; background: {background}; box-shadow: inset 3px 0 {bar}"
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


def show_source(*functions: Callable[..., Any], tint: Tint | None = None) -> SourceView:
    """The real source of each function (`inspect.getsource`), side by side, left to right;
    `tint(line)` may mark lines."""
    if not functions:
        raise TypeError("show_source needs at least one function, e.g. show_source(client_step)")
    columns = []
    for position, fn in enumerate(functions, start=1):
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
            raise TypeError(
                f"show_source: argument {position} is {a_type(fn)}, not a function; "
                "pass the function itself, without calling it"
            )
        path = fn.__module__.replace(".", "/") + ".py"
        columns.append((f"{fn.__qualname__} · {path}", textwrap.dedent(inspect.getsource(fn))))
    return SourceView(columns, tint)
