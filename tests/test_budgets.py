"""Every notebook stays short enough to finish: cells, words, code cell length, import cell length.

A notebook that is still over a budget is listed in OVER_BUDGET with what is over; the list can
only shrink: a listed notebook that meets a budget again fails here until its entry goes.
"""

import re

import nbformat
import pytest

from tests.support.notebook_files import IDS, NOTEBOOKS
from tooling import course

MAX_CELLS = 90
MAX_WORDS = 2500  # of markdown
MAX_CODE_LINES = 25  # per code cell; the generated Colab setup cell is not the lesson's code
MAX_IMPORT_LINES = 8  # the first code cell after the setup cell: imports and the seed

#: notebook -> the budgets it is still over (the keys of `measure`), and why that is known.
OVER_BUDGET: dict[str, tuple[set[str], str]] = {}


def measure(notebook) -> dict[str, int]:
    """The notebook's size on each budget."""
    code = [
        c
        for c in notebook.cells
        if c.cell_type == "code" and course.SETUP_TAG not in c.metadata.get("tags", [])
    ]
    return {
        "cells": len(notebook.cells),
        "words": sum(
            len(re.findall(r"\S+", c.source)) for c in notebook.cells if c.cell_type == "markdown"
        ),
        "code_lines": max((len(c.source.splitlines()) for c in code), default=0),
        "import_lines": len(code[0].source.splitlines()) if code else 0,
    }


LIMITS = {
    "cells": MAX_CELLS,
    "words": MAX_WORDS,
    "code_lines": MAX_CODE_LINES,
    "import_lines": MAX_IMPORT_LINES,
}


def over(sizes: dict[str, int]) -> set[str]:
    """The budgets these sizes exceed."""
    return {name for name, limit in LIMITS.items() if sizes[name] > limit}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_within_its_budgets(path):
    sizes = measure(nbformat.read(path, as_version=4))
    known, _ = OVER_BUDGET.get(path.name, (set(), ""))
    assert over(sizes) == known, (
        f"{path.name}: {sizes} against {LIMITS}; over: {sorted(over(sizes)) or 'nothing'}, "
        f"listed as over: {sorted(known) or 'nothing'} (tests/test_budgets.py)"
    )


def test_over_budget_entries_name_real_notebooks_and_a_reason():
    names = {p.name for p in NOTEBOOKS}
    for name, (budgets, why) in OVER_BUDGET.items():
        assert name in names and budgets <= set(LIMITS) and len(why) > 20, name


def test_measure_counts_what_the_budgets_mean():
    setup = nbformat.v4.new_code_cell("# generated\n" * 30, metadata={"tags": [course.SETUP_TAG]})
    cells = [
        nbformat.v4.new_markdown_cell("# Title with four words"),
        setup,
        nbformat.v4.new_code_cell("import torch\n\n_ = torch.manual_seed(0)"),
        nbformat.v4.new_code_cell("\n".join(["x = 1"] * 26)),
    ]
    sizes = measure(nbformat.v4.new_notebook(cells=cells))
    assert sizes == {"cells": 4, "words": 5, "code_lines": 26, "import_lines": 3}
    assert over(sizes) == {"code_lines"}
