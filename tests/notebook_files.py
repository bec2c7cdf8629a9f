"""The course's notebooks, for parametrized tests."""

from pathlib import Path

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)
IDS = [p.name for p in NOTEBOOKS]
