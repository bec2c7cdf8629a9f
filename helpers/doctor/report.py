"""How the doctor shows what it concluded: the table of parameters, the summary line, and the
findings with their lines, as text and as HTML."""

from __future__ import annotations

import html
import re

from helpers.display import Table
from helpers.doctor.verdicts import Conclusion, Finding
from helpers.language import say


def table(conclusion: Conclusion) -> Table:
    """One row per parameter: its gradient, its optimizers, how far it moved, its verdict."""
    none = say("common", "doctor.none")
    return Table(
        ["parameter", "gradient", "optimizer", "max |Δ|", "verdict"],
        [
            {
                "parameter": p.name,
                "gradient": say("common", f"doctor.kind_{p.kind}"),
                "optimizer": ", ".join(p.optimizers) if p.optimizers else none,
                "max |Δ|": p.moved,
                "verdict": say("common", f"doctor.verdict_{p.verdict.cause}"),
            }
            for p in conclusion.parameters
        ],
        title=say("common", "doctor.title"),
    )


def summary(parameters: int, problems: list[Finding]) -> str:
    """A clean bill for `parameters` parameters, or how many findings there are to fix."""
    if not problems:
        return say("common", "doctor.healthy", count=parameters)
    return say("common", "doctor.unhealthy", count=len(problems))


def note_on_error(problem: Finding) -> str:
    """What the doctor adds to the error the step raised: the first problem it found."""
    return say("common", "doctor.note_on_error", finding=str(problem))


def unfinished(state: str) -> str:
    """A checkup before its step is over: "ready" or "running"."""
    return f"<doctor checkup: {state}>"


def as_text(rows: Table, summary: str, findings: list[Finding]) -> str:
    """The table, the summary, then each finding with its line."""
    lines = [repr(rows), "", summary]
    lines += [f"- {f}" for f in findings]
    return "\n".join(lines)


def as_html(rows: Table, summary: str, findings: list[Finding]) -> str:
    """The table, the summary, then each finding (⚠️ a problem, ℹ️ a note) with its line."""
    items = []
    for f in findings:
        where = ""
        if f.location is not None:
            where = (
                f"<br><small>{html.escape(f.location.label)}</small> "
                f"<code>{html.escape(f.location.code)}</code>"
            )
        mark = "⚠️" if f.problem else "ℹ️"
        items.append(
            f"<li>{mark} <b>{html.escape(', '.join(f.parameters))}</b>: "
            f"{_text(f.message)}{where}</li>"
        )
    listing = f"<ul>{''.join(items)}</ul>" if items else ""
    return f"{rows._repr_html_()}<p>{html.escape(summary)}</p>{listing}"


def unfinished_html(state: str) -> str:
    return html.escape(unfinished(state))


def _text(value: str) -> str:
    """A message as HTML: `code` in it is shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(value))
