"""Notebook 05b's engine as the notebook builds it: the reference the tests check and break.

Nothing is copied here. The engine is the code cells of notebooks/05b_build_the_engine.ipynb that
are tagged `engine` (the code given to the learner) and the solutions of its exercises (the cells
`tooling.course.hidden_cells` folds as solutions, up to their checker call), in notebook order;
`source(N)` stops after exercise N's solution, as the notebook stands when exercise N is done.
"""

from __future__ import annotations

import types
from functools import cache
from pathlib import Path

import numpy as np

from tooling.course import NOTEBOOKS, hidden_cells

NOTEBOOK: Path = NOTEBOOKS / "05b_build_the_engine.ipynb"
#: The tag of the code cells that hold the engine's given parts.
ENGINE_TAG = "engine"
#: Where a solution's engine code ends: its checker call.
CHECK = "result = check_engine("


@cache
def _cells() -> tuple[tuple[str, str], ...]:
    """The engine's cells in notebook order, each as ("given" or "solution", its code)."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    solutions = hidden_cells(nb)
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if solutions.get(index) == "solution":
            lines = cell.source.splitlines()[1:]  # the folded cell's title line goes
            code = "\n".join(lines)
            found.append(("solution", code[: code.index(CHECK)].rstrip() + "\n"))
        elif ENGINE_TAG in cell.metadata.get("tags", []):
            found.append(("given", cell.source.rstrip() + "\n"))
    return tuple(found)


def cells(exercise: int | None = None) -> list[str]:
    """The engine's cells' code, up to exercise `exercise`'s solution (all, by default)."""
    taken, solved = [], 0
    for kind, code in _cells():
        taken.append(code)
        solved += kind == "solution"
        if exercise is not None and solved == exercise:
            break
    return taken


def source(exercise: int | None = None) -> str:
    """The engine's code as one program, up to exercise `exercise`'s solution."""
    return "\n\n".join(cells(exercise))


def build(code: str, name: str = "engine") -> types.ModuleType:
    """A module made by running `code` with nothing but numpy, as `np`, at hand."""
    module = types.ModuleType(name)
    module.np = np
    exec(compile(code, f"<{name}>", "exec"), module.__dict__)
    return module


def engine(exercise: int | None = None) -> types.ModuleType:
    """The notebook's engine as it stands after exercise `exercise` (the whole, by default)."""
    return build(source(exercise), f"engine after exercise {exercise or 'all'}")
