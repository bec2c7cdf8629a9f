"""`python -m tests.runners.wild`: the explainer measured on autograd errors from public threads.

Each script of tests/explain/wild/ is one report from a GitHub issue, a forum or Q&A thread,
reduced to a runnable program that keeps the learner's code: its docstring opens with the family
torch's message belongs to and what the learner did, then the thread's address and title; its
causal line ends with `# cause` (the line the thread's fix changes, or where a tensor was changed
in place); and where a fix can be checked, `right()` returns the gradients of the right program,
which the script stores in `GRADS` when it runs to its end.

Each script runs twice, in this process: under the explainer's watch (`helpers.explain`), and
under `torch.autograd.detect_anomaly()`, PyTorch's own aid. The table, WILD.md at the repository's
root, says per report the family expected and the one named, whether the explainer's causal line
is the marked line, whether its suggested edit (when it gives one) makes the script run and give
the right gradients, and where anomaly mode's "Traceback of forward call" ends in the script;
then the totals. `tests/explain/test_wild.py` fails when WILD.md is not what this makes now.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
WILD = ROOT / "tests" / "explain" / "wild"
TABLE = ROOT / "WILD.md"
#: The roles of an explanation's places that say where the cause is; a family whose cause is the
#: line that raised has only `surfaced`.
CAUSAL_ROLES = ("changed", "freed", "carried", "cut", "grad_off", "unreduced", "kept")
#: What anomaly mode prints before the forward traceback of the node that failed.
FORWARD_TRACEBACK = "Traceback of forward call that caused the error:"


@dataclass(frozen=True)
class Report:
    """One script: where it came from, the family it belongs to, its causal line."""

    path: Path
    family: str
    what: str
    address: str
    title: str
    cause: int

    @property
    def name(self) -> str:
        return self.path.stem


def read_report(path: Path) -> Report:
    """The report a script states in its docstring and its `# cause` marker."""
    source = path.read_text()
    found = re.match(r'"""(\w+): (.*?)\n\n(https?://\S+)\n(.+?)\n"""', source, re.S)
    if found is None:
        raise ValueError(f"{path.name}: the docstring must be 'family: what', address, title")
    causes = [
        number
        for number, line in enumerate(source.splitlines(), 1)
        if line.rstrip().endswith("# cause")
    ]
    if len(causes) != 1:
        raise ValueError(f"{path.name}: mark exactly one line `# cause` ({len(causes)} marked)")
    family, what, address, title = found.groups()
    return Report(path, family, " ".join(what.split()), address, title.strip(), causes[0])


def reports(folder: Path = WILD) -> list[Report]:
    return [read_report(path) for path in sorted(folder.glob("[0-9]*.py"))]


def execute(path: Path, source: str | None = None) -> tuple[BaseException | None, dict]:
    """Runs a script as `python path` would (its `__name__` is "__main__"), in this process; the
    error it raised (None when it ran to its end) and its globals, kept even when it raised."""
    scope: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    code = compile(path.read_text() if source is None else source, str(path), "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(code, scope)
        except Exception as err:  # the script's own error: what is measured
            return err, scope
    return None, scope


@dataclass(frozen=True)
class Result:
    """What the explainer and anomaly mode said about one report."""

    report: Report
    raised: str  # the type of error the script raised ("" when it raised none)
    message: str  # torch's message
    named: str  # the family the explainer named ("" when it said nothing)
    causal: tuple[int, ...]  # the explainer's causal lines in the script
    edit: str  # what its edit did: "" (none suggested), "right", "wrong gradients", "fails: ..."
    anomaly: int | None  # the script's last line in anomaly mode's forward traceback

    @property
    def named_right(self) -> bool:
        return self.named == self.report.family and self.report.cause in self.causal

    @property
    def anomaly_right(self) -> bool:
        return self.anomaly == self.report.cause


def causal_lines(explanation: Any, path: Path) -> tuple[int, ...]:
    """The lines of `path` an explanation gives as the cause: its causal places, or the line
    that raised when it has none."""
    places = [p for p in explanation.places if p.role in CAUSAL_ROLES]
    if not places:
        places = [p for p in explanation.places if p.role == "surfaced"]
    return tuple(sorted({p.at.line for p in places if Path(p.at.filename) == path}))


def explain_report(report: Report) -> tuple[BaseException | None, str, tuple[int, ...], Any]:
    """The script run under the explainer's watch: the error it raised, the family named, the
    causal lines, and the explanation itself (None when it said nothing)."""
    from helpers import explain

    watch = explain.Watch()
    with watch:
        error, _ = execute(report.path)
    if error is None:
        return None, "", (), None
    explanation = explain.explain(error, error.__traceback__, watch)
    if explanation is None:
        return error, "", (), None
    return (
        error,
        explanation.family,
        causal_lines(explanation, report.path),
        explanation,
    )


def check_edit(report: Report, explanation: Any) -> str:
    """Applies the explanation's edits to the script and runs it: "right" when it runs to its end
    and its GRADS are the right program's, else what went wrong."""
    if explanation is None or not explanation.edits:
        return ""
    source = report.path.read_text()
    for edit in explanation.edits:
        source = edit.apply(source)
    with tempfile.TemporaryDirectory() as folder:
        fixed = Path(folder) / report.path.name
        fixed.write_text(source)
        error, scope = execute(fixed)
    if error is not None:
        return f"fails: {type(error).__name__}"
    if "right" not in scope or "GRADS" not in scope:
        return "runs; no right program to compare"
    right = scope["right"]()
    for key, value in right.items():
        try:
            torch.testing.assert_close(scope["GRADS"][key], value)
        except (AssertionError, KeyError):
            return "runs, wrong gradients"
    return "right"


def forward_line(message: str, path: Path) -> int | None:
    """The last line of `path` in anomaly mode's forward traceback within a warning's text."""
    if FORWARD_TRACEBACK not in message:
        return None
    traceback = message.split(FORWARD_TRACEBACK, 1)[1]
    frames = re.findall(r'File "([^"]+)", line (\d+)', traceback)
    lines = [int(line) for file, line in frames if Path(file) == path]
    return lines[-1] if lines else None


def anomaly_report(report: Report) -> int | None:
    """The script run under detect_anomaly: the script's last line in the forward traceback of
    the node that failed (None when anomaly mode printed none: an error raised outside a
    backward)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            scope: dict[str, Any] = {"__name__": "__main__", "__file__": str(report.path)}
            try:
                exec(compile(report.path.read_text(), str(report.path), "exec"), scope)
            except Exception:  # the script's own error: anomaly mode has warned before it
                pass
    found = [forward_line(str(w.message), report.path) for w in caught]
    return next((line for line in found if line is not None), None)


def measure(folder: Path = WILD) -> list[Result]:
    results = []
    for report in reports(folder):
        error, named, causal, explanation = explain_report(report)
        raised = "" if error is None else type(error).__name__
        message = "" if error is None else str(error)
        edit = check_edit(report, explanation)
        results.append(
            Result(report, raised, message, named, causal, edit, anomaly_report(report))
        )
    return results


def share(count: int, total: int) -> str:
    return f"{count} of {total} ({100 * count / total:.0f}%)" if total else "0 of 0"


def _lines(lines: tuple[int, ...]) -> str:
    return ", ".join(str(n) for n in lines) if lines else "—"


def render(results: list[Result]) -> str:
    """WILD.md: the table of every report, then the totals."""
    rows = []
    for r in results:
        rep = r.report
        named = r.named or "(nothing)"
        cause = f"{rep.cause} / {_lines(r.causal)}" + (" ✓" if r.named_right else " ✗")
        anomaly = "—" if r.anomaly is None else f"{r.anomaly}" + (" ✓" if r.anomaly_right else "")
        rows.append(
            f"| {rep.name} | [{rep.title.replace('|', '/')}]({rep.address}) | {rep.family} "
            f"| {named} | {cause} | {r.edit or '—'} | {anomaly} |"
        )
    total = len(results)
    right = [r for r in results if r.named_right]
    family = [r for r in results if r.named == r.report.family]
    edits = [r for r in results if r.edit]
    good_edits = [r for r in edits if r.edit == "right"]
    traced = [r for r in results if r.anomaly is not None]
    anomaly_right = [r for r in results if r.anomaly_right]
    misses = [r for r in results if not r.named_right]
    lines = [
        "# The explainer on errors from the wild",
        "",
        "Generated by `python -m tests.runners.wild` (do not edit by hand; "
        "`tests/explain/test_wild.py` fails when this file is not what the runner makes now).",
        "",
        "Each report is an autograd error a learner met and asked about in public (a GitHub "
        "issue, a forum or Q&A thread), reduced to a small script that keeps the learner's code: "
        "`tests/explain/wild/`. Each script marks its causal line `# cause` (the line the "
        "thread's fix changes, or where a tensor was changed in place) and, where a fix can be "
        "checked, gives the right program's gradients. Each runs under the course's explainer "
        "(`helpers.explain`) and, apart, under `torch.autograd.detect_anomaly()`.",
        "",
        "Columns: the family of torch's message and the family the explainer named; the marked "
        "line / the explainer's causal lines (✓ when the family and the line are right); what "
        "the explainer's suggested edit did when applied (right: the script runs and gives the "
        "right program's gradients); the script's last line in anomaly mode's \"Traceback of "
        "forward call\" (✓ when it is the marked line; — when anomaly mode printed none, as for "
        "every error raised outside a backward).",
        "",
        "| report | thread | family | named | cause: marked / named | edit | anomaly mode |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "## Totals",
        "",
        f"- Family and causal line named right: {share(len(right), total)}.",
        f"- Family named right: {share(len(family), total)}.",
        f"- Edits suggested: {len(edits)} of {total}; right: {share(len(good_edits), len(edits))}.",
        f"- Anomaly mode printed a forward traceback: {share(len(traced), total)}; "
        f"it ends at the causal line: {share(len(anomaly_right), total)}.",
        "",
        "## Misses",
        "",
    ]
    if not misses:
        lines.append("None.")
    for r in misses:
        named = r.named or "nothing"
        lines.append(
            f"- {r.report.name}: expected {r.report.family} at line {r.report.cause}; "
            f"named {named}" + (f" at {_lines(r.causal)}" if r.causal else "") + "."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when WILD.md is stale")
    args = parser.parse_args(argv)
    text = render(measure())
    if args.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print("WILD.md is up to date" if same else "WILD.md is stale")
        return 0 if same else 1
    TABLE.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
