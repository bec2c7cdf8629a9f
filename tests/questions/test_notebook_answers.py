"""Notebook 10b answers every question of the collection, in both editions, with a cell that
asserts it; the doctor's verdict is shown on each bug it finds; the READMEs and 08 name them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from helpers.doctor import CAUSES
from helpers.questions import NOTEBOOK, learner_questions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
EN = learner_questions("en")


def _asked(cell) -> str | None:
    """The id a code cell asks about: its first statement is ask("<id>")."""
    tree = ast.parse(_python(cell.source))
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Call)
        and getattr(first.value.func, "id", None) == "ask"
        and len(first.value.args) == 1
        and isinstance(first.value.args[0], ast.Constant)
    ):
        return first.value.args[0].value
    return None


def answering_cells(path: Path) -> dict[str, list]:
    """Each question's cells in a notebook: the cell that asks it and the code cells after it, up to
    the next question or the next section."""
    found: dict[str, list] = {}
    current = None
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            current = None
            continue
        asked = _asked(cell)
        if asked is not None:
            assert asked not in found, f"{path.name}: question {asked!r} is asked twice"
            current = found[asked] = []
        if current is not None:
            current.append(cell)
    return found


def _python(cell: str) -> str:
    """A cell as IPython runs it (a setup cell says `%load_ext helpers`)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell)


#: Helpers that raise AssertionError when the error or warning they expect does not happen.
CHECKING = {"expect_error", "expect_warning"}


def _asserts(cells) -> int:
    """How many claims the cells check: assert statements and expect_error / expect_warning."""
    nodes = [n for c in cells for n in ast.walk(ast.parse(_python(c.source)))]
    checked = [
        n for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "id", None) in CHECKING
    ]
    return sum(isinstance(n, ast.Assert) for n in nodes) + len(checked)


@pytest.mark.parametrize("edition", ["", "zh"])
def test_every_question_is_answered_by_a_cell_that_asserts_it(edition):
    path = NOTEBOOKS / edition / NOTEBOOK
    cells = answering_cells(path)
    assert list(cells) == list(EN), f"{path.name} asks the questions in the collection's order"
    for question, its_cells in cells.items():
        assert _asserts(its_cells) >= 1, f"{question}: its cells assert nothing"
        outputs = [o for c in its_cells for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"], question


def test_a_course_notebook_named_for_depth_exists():
    for q in EN.values():
        if q.see:
            assert (NOTEBOOKS / q.see).exists(), f"{q.id}: no notebook {q.see}"


def test_the_doctor_s_verdict_is_shown_on_the_bug_in_the_question_s_cells():
    cells = answering_cells(NOTEBOOKS / NOTEBOOK)
    with_doctor = {q.id: q.doctor for q in EN.values() if q.doctor}
    assert len(with_doctor) >= 5
    for question, verdict in with_doctor.items():
        assert CAUSES.get(verdict) is True, f"{question}: {verdict!r} is not a problem verdict"
        source = "\n".join(c.source for c in cells[question])
        asserted = {
            n.value
            for a in ast.walk(ast.parse(_python(source)))
            if isinstance(a, ast.Assert)
            for n in ast.walk(a)
            if isinstance(n, ast.Constant)
        }
        assert "doctor(" in source and verdict in asserted, (
            f"{question}: no cell of it runs the doctor and asserts {verdict!r}"
        )


@pytest.mark.parametrize(
    ("readme", "notebook", "code"),
    [
        ("README.md", "08_grad_modes_and_why_nothing_learns.ipynb", "en"),
        ("README.zh.md", "zh/08_grad_modes_and_why_nothing_learns.ipynb", "zh"),
    ],
)
def test_the_readme_and_08_name_the_questions_the_doctor_answers(readme, notebook, code):
    section = (ROOT / readme).read_text(encoding="utf-8").split("\n## ")
    doctor_section = next(s for s in section if "from helpers.doctor import doctor" in s)
    shown = "".join(
        o.get("data", {}).get("text/markdown", "")
        for c in nbformat.read(NOTEBOOKS / notebook, as_version=4).cells
        for o in c.get("outputs", [])
    )
    counted = re.search(r"(\d+) (questions|个问题)", doctor_section)
    assert counted and int(counted.group(1)) == len(EN), f"{readme} counts the questions wrong"
    for q in learner_questions(code).values():
        if q.doctor:
            assert q.short in doctor_section, f"{readme}'s doctor section lacks {q.short!r}"
            assert q.short in shown, f"{notebook} does not show {q.short!r}"
