"""`python -m tests.runners.wild`'s bookkeeping: how a report is read, what counts as named
right, how an edit is judged, where anomaly mode's traceback ends, and the table's totals."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.doctor.record import Location
from helpers.explain import Edit
from tests.runners import wild

SCRIPT = '''"""inplace_saved: the learner did this
and that.

https://example.org/t/1
A title
"""

import torch


def right():
    return {"x": torch.full((2,), 3.0)}


x = torch.ones(2, requires_grad=True)
y = x * 2  # cause
(y + x).sum().backward()
GRADS = {"x": x.grad}
'''


def write(tmp_path: Path, text: str, name: str = "01_case.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_report_is_read_from_its_docstring_and_its_cause_marker(tmp_path):
    report = wild.read_report(write(tmp_path, SCRIPT))
    assert (report.family, report.what) == ("inplace_saved", "the learner did this and that.")
    assert (report.address, report.title) == ("https://example.org/t/1", "A title")
    assert report.cause == 16
    assert report.name == "01_case"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (SCRIPT.replace("  # cause", ""), "exactly one"),
        (SCRIPT.replace("x = torch.ones(2, requires_grad=True)", "x = 1  # cause"), "exactly one"),
        (SCRIPT.replace("https://example.org/t/1\n", ""), "docstring"),
    ],
)
def test_a_script_without_its_report_is_refused(tmp_path, text, words):
    with pytest.raises(ValueError, match=words):
        wild.read_report(write(tmp_path, text))


def test_only_numbered_scripts_are_reports(tmp_path):
    write(tmp_path, SCRIPT)
    write(tmp_path, "x = 1\n", name="helper.py")
    assert [r.name for r in wild.reports(tmp_path)] == ["01_case"]


def explanation(path: Path, places, edits=()):
    return SimpleNamespace(
        places=[SimpleNamespace(role=role, at=Location(str(path), line, "<module>"))
                for role, line in places],
        edits=edits,
    )


def test_the_causal_lines_are_the_causal_places_else_the_line_that_raised(tmp_path):
    path = write(tmp_path, SCRIPT)
    both = explanation(path, [("saved", 3), ("changed", 16), ("surfaced", 17)])
    assert wild.causal_lines(both, path) == (16,)
    alone = explanation(path, [("surfaced", 17)])
    assert wild.causal_lines(alone, path) == (17,)
    elsewhere = explanation(tmp_path / "other.py", [("changed", 16)])
    assert wild.causal_lines(elsewhere, path) == ()


def result(report, named, causal, edit="", anomaly=None):
    return wild.Result(report, "RuntimeError", "", named, causal, edit, anomaly)


def test_named_right_needs_the_family_and_the_marked_line(tmp_path):
    report = wild.read_report(write(tmp_path, SCRIPT))
    assert result(report, "inplace_saved", (16, 17)).named_right
    assert not result(report, "inplace_saved", (17,)).named_right
    assert not result(report, "backward_twice", (16,)).named_right
    assert not result(report, "", ()).named_right


def test_an_edit_is_right_only_when_the_program_runs_and_gives_the_right_gradients(tmp_path):
    path = write(tmp_path, SCRIPT)
    report = wild.read_report(path)
    at = Location(str(path), 16, "<module>")
    assert wild.check_edit(report, explanation(path, [], [Edit(at, "y = x * 2")])) == "right"
    wrong = explanation(path, [], [Edit(at, "y = x * 3")])
    assert wild.check_edit(report, wrong) == "runs, wrong gradients"
    broken = explanation(path, [], [Edit(at, "y = z * 2")])
    assert wild.check_edit(report, broken) == "fails: NameError"
    assert wild.check_edit(report, explanation(path, [])) == ""
    assert wild.check_edit(report, None) == ""


def test_the_forward_traceback_ends_at_the_scripts_last_frame(tmp_path):
    path = tmp_path / "01_case.py"
    message = (
        "Error detected in MulBackward0. Traceback of forward call that caused the error:\n"
        f'  File "{path}", line 20, in <module>\n    y = f(x)\n'
        f'  File "{path}", line 9, in f\n    return x * 2\n'
        '  File "/lib/torch/nn/functional.py", line 5, in relu\n'
    )
    assert wild.forward_line(message, path) == 9
    assert wild.forward_line("Anomaly Detection has been enabled.", path) is None
    assert wild.forward_line(message, tmp_path / "other.py") is None


def test_anomaly_mode_is_read_from_a_real_backward(tmp_path):
    text = SCRIPT.replace("(y + x).sum().backward()", "z = y.exp()\nz.add_(1)\nz.sum().backward()")
    report = wild.read_report(write(tmp_path, text))
    assert wild.anomaly_report(report) == 17  # the line that made the node whose backward failed


def test_the_table_counts_what_it_shows(tmp_path):
    report = wild.read_report(write(tmp_path, SCRIPT))
    results = [
        result(report, "inplace_saved", (16,), "right", 16),
        result(report, "inplace_saved", (17,), "fails: NameError", 15),
        result(report, "", ()),
    ]
    text = wild.render(results)
    assert "Family and causal line named right: 1 of 3 (33%)." in text
    assert "Family named right: 2 of 3 (67%)." in text
    assert "Edits suggested: 2 of 3; right: 1 of 2 (50%)." in text
    assert "forward traceback: 2 of 3 (67%); it ends at the causal line: 1 of 3 (33%)." in text
    assert "- 01_case: expected inplace_saved at line 16; named inplace_saved at 17." in text
    assert "- 01_case: expected inplace_saved at line 16; named nothing." in text
    assert text.count("| 01_case | [A title](https://example.org/t/1) |") == 3
