"""The course's notebooks, for parametrized tests."""

from pathlib import Path

from helpers.course import course_notebooks

NOTEBOOKS = course_notebooks(Path(__file__).resolve().parent.parent / "notebooks")
IDS = [p.name for p in NOTEBOOKS]
