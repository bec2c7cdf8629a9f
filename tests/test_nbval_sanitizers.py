"""No dead sanitizer in tests/nbval_sanitize.cfg: each matches a committed output nbval compares.

nbval compares sanitize(committed) with sanitize(fresh). A regex that matches no committed output
leaves the committed side as it is, so a fresh output passes only if it equals it anyway (unless
the committed text holds the replacement itself): such a sanitizer hides nothing and only claims a
nondeterminism the course does not have.
"""

import functools
import re
from pathlib import Path

import nbformat
from nbval.plugin import find_comment_markers, find_metadata_tags, get_sanitize_patterns

from tests.support.notebook_files import NOTEBOOKS

CONFIG = Path(__file__).resolve().parent / "nbval_sanitize.cfg"
#: What nbval never compares (its own list, plus the SVG that conftest.py skips).
SKIPPED = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
}


def compared_strings(cell) -> list[str]:
    """The output strings nbval compares for this cell (none if the cell is skipped/ignored)."""
    options = {"check": True, "skip": False}
    options.update(dict(find_comment_markers(cell.source)))
    options.update(dict(find_metadata_tags(cell.metadata)))
    if options["skip"] or not options["check"]:
        return []
    strings = []
    for out in cell.get("outputs", []):
        for key, value in out.items():
            if key == "data":
                strings += [v for k, v in value.items() if k not in SKIPPED]
            elif key not in SKIPPED:
                strings.append(value)
    return [s for s in strings if isinstance(s, str)]


@functools.cache
def committed_outputs() -> list[tuple[str, str]]:
    """(notebook name, output string) for every output nbval compares in the committed notebooks."""
    found = []
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                found += [(path.name, s) for s in compared_strings(cell)]
    return found


PATTERNS = get_sanitize_patterns(CONFIG.read_text())


def test_the_config_is_read_as_nbval_reads_it():
    sections = [line for line in CONFIG.read_text().splitlines() if line.startswith("regex:")]
    assert len(PATTERNS) == len(sections)  # no section nbval would silently drop


def dead_sanitizers(patterns, outputs) -> list[str]:
    """The regexes among `patterns` that match none of `outputs` ((notebook, text) pairs)."""
    return [regex for regex, _ in patterns if not any(re.search(regex, t) for _, t in outputs)]


def test_every_sanitizer_matches_a_committed_output():
    assert dead_sanitizers(PATTERNS, committed_outputs()) == [], (
        "these sanitizers match no committed output that nbval compares: "
        "remove them from tests/nbval_sanitize.cfg"
    )


def test_a_sanitizer_that_matches_nothing_is_found():
    outputs = [("00.ipynb", "graphviz version 2.43.0 (0)"), ("01.ipynb", "x = 1")]
    patterns = [(r"graphviz version \S+", "X"), (r"0x[0-9a-f]+", "0x…")]
    assert dead_sanitizers(patterns, outputs) == [r"0x[0-9a-f]+"]


def test_compared_strings_follow_nbvals_markers():
    out = nbformat.v4.new_output("stream", name="stdout", text="0x12345678\n")
    checked = nbformat.v4.new_code_cell("print(1)", outputs=[out])
    ignored = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(1)", outputs=[out])
    assert compared_strings(checked) == ["0x12345678\n"]
    assert compared_strings(ignored) == []
