"""The course's notebooks, for parametrized tests, and their code cells as Python."""

import ast
import os
from pathlib import Path

from tooling.course import course_notebooks

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = course_notebooks(FOLDER)
IDS = [p.name for p in NOTEBOOKS]
#: Both editions: the English notebooks, then their Chinese twins (notebooks/zh/).
EVERY_EDITION = NOTEBOOKS + course_notebooks(FOLDER / "zh")
EVERY_EDITION_IDS = [p.relative_to(FOLDER).as_posix() for p in EVERY_EDITION]


def chosen(notebooks: list[Path]) -> list[Path]:
    """The notebooks the tests that run notebooks run: all of them, or, for the one-notebook
    check (`make test NB=07b`), those whose name starts with $COURSE_NOTEBOOK."""
    prefix = os.environ.get("COURSE_NOTEBOOK", "")
    return [p for p in notebooks if p.name.startswith(prefix)]


#: The English notebooks that notebook-running tests run (every one, unless $COURSE_NOTEBOOK).
CHOSEN = chosen(NOTEBOOKS)
CHOSEN_IDS = [p.name for p in CHOSEN]


def chosen_twins(prefixes: tuple[str, ...]) -> list[Path]:
    """The Chinese twins a notebook-running test runs beside the English notebooks: for the
    one-notebook check ($COURSE_NOTEBOOK), the chosen notebook's twin; in `make test`, those whose
    names start with one of `prefixes` (the test says why those)."""
    one_notebook = bool(os.environ.get("COURSE_NOTEBOOK"))
    return [
        FOLDER / "zh" / p.name for p in CHOSEN if one_notebook or p.name.startswith(prefixes)
    ]


def cell_tree(code: str) -> ast.Module | None:
    """A code cell's Python syntax tree, its IPython `%` and `!` lines left out; None when the
    rest does not parse."""
    source = "\n".join(
        line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))
    )
    try:
        return ast.parse(source)
    except SyntaxError:
        return None
