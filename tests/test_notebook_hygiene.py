"""What every committed notebook must be: run in order, light, honest about what it ignores."""

import json
import re

import nbformat
import pytest

from helpers import course
from tests.notebook_files import IDS, NOTEBOOKS

MAX_BYTES = 600_000
IGNORE = "# NBVAL_IGNORE_OUTPUT"


@pytest.fixture(params=NOTEBOOKS, ids=IDS)
def nb(request):
    return request.param, nbformat.read(request.param, as_version=4)


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code" and c.source.strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


def test_valid_and_light(nb):
    path, notebook = nb
    nbformat.validate(notebook)
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size} bytes"


def test_executed_top_to_bottom_with_outputs(nb):
    path, notebook = nb
    cells = code_cells(notebook)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert any(c.outputs for c in cells), f"{path.name} was committed without outputs"


def test_no_errors_and_no_stderr_in_outputs(nb):
    _, notebook = nb
    for cell in code_cells(notebook):
        for out in cell.outputs:
            assert out.output_type != "error", cell.source[:80]
            assert out.get("name") != "stderr", f"stray stderr after: {cell.source[:80]}"


def test_no_exception_markers(nb):
    _, notebook = nb
    text = json.dumps(notebook)
    assert "NBVAL_RAISES_EXCEPTION" not in text and "raises-exception" not in text


def test_every_ignore_marker_says_why(nb):
    _, notebook = nb
    for cell in code_cells(notebook):
        for line in cell.source.splitlines():
            if line.startswith(IGNORE):
                reason = line[len(IGNORE) :].lstrip(":").strip()
                assert len(reason) >= 15, f"ignore marker without a reason: {line!r}"


def test_skeleton_title_badges_setup(nb):
    path, notebook = nb
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and re.match(r"# \S", first.source)
    tags = [c.metadata.get("tags", []) for c in notebook.cells[:3]]
    assert course.BADGE_TAG in tags[1] and course.SETUP_TAG in tags[2]
    assert not course.sync_notebook(path, write=False), "run `python -m helpers.course sync`"


def test_no_printed_object_addresses(nb):
    _, notebook = nb
    for cell in code_cells(notebook):
        for out in cell.outputs:
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]{6,}", text), cell.source[:80]


def test_widget_state_is_well_formed(nb):
    _, notebook = nb
    widgets = notebook.metadata.get("widgets")
    if widgets:
        assert "state" in widgets["application/vnd.jupyter.widget-state+json"]


def test_links_to_other_notebooks_resolve(nb):
    path, notebook = nb
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for target in re.findall(r"\]\(([^)#\s]+\.ipynb)", cell.source):
            if not target.startswith("http"):
                assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_widget_ids_are_stable_so_reruns_diff_cleanly(nb):
    _, notebook = nb
    state = notebook.metadata.get("widgets", {}).get(course.WIDGET_STATE, {}).get("state", {})
    assert list(state) == [f"{n + 1:032x}" for n in range(len(state))]
