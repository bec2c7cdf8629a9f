"""One explanation of an autograd error, shaped like a good compiler's: a sentence of what
happened, the learner's lines that matter (each labelled), the fix as an edit of their code, why
not the wrong fix that circulates, and torch's own message, verbatim, below."""

from __future__ import annotations

import html
from dataclasses import dataclass

from helpers.doctor.record import Location
from helpers.language import say

__all__ = ["Edit", "Explanation", "Place"]


@dataclass(frozen=True)
class Place:
    """A line of the learner's code and what happened there (a key of `explain.place`)."""

    role: str  # saved, changed, freed, cut, surfaced, ...
    at: Location
    detail: str = ""


@dataclass(frozen=True)
class Edit:
    """The fix, as a change of one line: `line` becomes `new` (several lines allowed)."""

    at: Location
    new: str

    def apply(self, source: str) -> str:
        """`source` (the whole file) with this line replaced, keeping the line's indentation."""
        lines = source.splitlines()
        old = lines[self.at.line - 1]
        indent = old[: len(old) - len(old.lstrip())]
        lines[self.at.line - 1 : self.at.line] = [indent + part for part in self.new.splitlines()]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Explanation:
    """What the explainer says about one error."""

    family: str
    what: str
    places: tuple[Place, ...]
    edits: tuple[Edit, ...] = ()
    fix: str = ""  # the fix in words, when it is not one edit (or to go with it)
    not_this: str = ""  # the wrong fix that circulates, and why not
    torch_message: str = ""
    error_type: str = "RuntimeError"

    def place(self, role: str) -> Location | None:
        """The line of `role` (saved, changed, surfaced, ...), if the explanation has one."""
        return next((p.at for p in self.places if p.role == role), None)

    def as_text(self) -> str:
        """Plain text, for a terminal or a log."""
        lines = [
            say(
                "common",
                "explain.heading.title",
                family=say("common", f"explain.{self.family}.name"),
            )
        ]
        lines.append(self.what)
        if self.places:
            lines.append("")
        width = max((len(p.at.label) for p in self.places), default=0)
        for p in self.places:
            role = say("common", f"explain.place.{p.role}")
            detail = f" ({p.detail})" if p.detail else ""
            lines.append(f"  {p.at.label:<{width}}  {p.at.code}")
            lines.append(f"  {'':<{width}}  ^ {role}{detail}")
        if self.edits or self.fix:
            lines += ["", say("common", "explain.heading.fix_heading")]
            if self.fix:
                lines.append(f"  {self.fix}")
            for edit in self.edits:
                lines.append(f"  {edit.at.label}:")
                lines.append(f"  - {edit.at.code}")
                lines += [f"  + {part}" for part in edit.new.splitlines()]
        if self.not_this:
            lines += ["", self.not_this]
        lines += [
            "",
            say("common", "explain.heading.torch_said"),
            f"  {self.error_type}: {self.torch_message}",
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self.as_html()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """IPython's plain form (a terminal, a notebook's text/plain): the text, which names a
        cell by its first line rather than by the kernel's temporary file."""
        printer.text(self.as_text())

    def as_html(self) -> str:
        """HTML, for a notebook: the same parts, the code in monospace."""
        name = say("common", f"explain.{self.family}.name")
        parts = [
            '<div class="autograd-explanation" style="border-left:4px solid #c0392b;'
            'padding:4px 12px;margin:4px 0">',
            f"<p><b>{html.escape(say('common', 'explain.heading.title', family=name))}</b></p>",
            f"<p>{html.escape(self.what)}</p>",
        ]
        if self.places:
            rows = "".join(
                f"<tr><td><code>{html.escape(p.at.label)}</code></td>"
                f"<td><code>{html.escape(p.at.code)}</code></td>"
                f"<td>← {html.escape(say('common', f'explain.place.{p.role}'))}"
                f"{html.escape(f' ({p.detail})' if p.detail else '')}</td></tr>"
                for p in self.places
            )
            parts.append(f"<table>{rows}</table>")
        if self.edits or self.fix:
            parts.append(
                f"<p><b>{html.escape(say('common', 'explain.heading.fix_heading'))}</b></p>"
            )
            if self.fix:
                parts.append(f"<p>{html.escape(self.fix)}</p>")
            for edit in self.edits:
                new = "\n".join(f"+ {part}" for part in edit.new.splitlines())
                parts.append(
                    f"<pre>{html.escape(edit.at.label)}:\n- {html.escape(edit.at.code)}\n"
                    f"{html.escape(new)}</pre>"
                )
        if self.not_this:
            parts.append(f"<p>{html.escape(self.not_this)}</p>")
        parts.append(
            f"<p>{html.escape(say('common', 'explain.heading.torch_said'))}</p>"
            f"<pre>{html.escape(self.error_type)}: {html.escape(self.torch_message)}</pre></div>"
        )
        return "".join(parts)
