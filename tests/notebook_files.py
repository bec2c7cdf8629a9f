"""The course's notebooks, for parametrized tests."""

from pathlib import Path

from helpers.course import course_notebooks

FOLDER = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = course_notebooks(FOLDER)
IDS = [p.name for p in NOTEBOOKS]
#: Both editions: the English notebooks, then their Chinese twins (notebooks/zh/).
EVERY_EDITION = NOTEBOOKS + course_notebooks(FOLDER / "zh")
EVERY_EDITION_IDS = [p.relative_to(FOLDER).as_posix() for p in EVERY_EDITION]
