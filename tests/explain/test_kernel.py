"""`%load_ext helpers` in an IPython shell: cells are watched, an autograd error is explained
with its causal line, other errors keep IPython's traceback, and `import helpers` alone does not
load the explainer's watch."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

import helpers


@pytest.fixture
def shell(monkeypatch):
    shell = InteractiveShell.instance()
    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    shell.shown = shown
    yield shell
    helpers.unload_ipython_extension(shell)
    InteractiveShell.clear_instance()


CELLS = [
    "import torch\nx = torch.randn(3, requires_grad=True)",
    "h = x.sigmoid()\ny = h * h",
    "h.mul_(2)",
    "y.sum().backward()",
]


def test_load_ext_explains_an_in_place_change_made_in_another_cell(shell, capsys):
    shell.run_cell("%load_ext helpers")
    for cell in CELLS:
        shell.run_cell(cell)
    (picture,) = shell.shown
    page = picture.data
    assert "a saved tensor was changed in place" in page
    assert "h.mul_(2)" in page and "h = x.sigmoid()" in page
    assert "<details><summary>traceback</summary>" in page
    assert "modified by an inplace operation" in capsys.readouterr().out  # torch's words stay


def test_an_error_that_is_not_autograds_keeps_its_traceback(shell, capsys):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("{}['missing']")
    assert shell.shown == []
    assert "KeyError" in capsys.readouterr().out


def test_without_load_ext_no_cell_is_watched(shell):
    for cell in CELLS:
        shell.run_cell(cell)
    assert shell.shown == []


def test_unload_ext_gives_ipythons_tracebacks_back(shell):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("%unload_ext helpers")
    for cell in CELLS:
        shell.run_cell(cell)
    assert shell.shown == []


def test_two_cells_at_the_same_line_number_are_not_one_loop(shell):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("import torch\nx = torch.randn(3, requires_grad=True)\ny = x.sigmoid() * 2")
    shell.run_cell("y.sum().backward()")
    shell.run_cell("(y * 1).sum().backward()")
    (picture,) = shell.shown
    assert "an earlier backward() already went through" in picture.data
    assert "the step before" not in picture.data


def test_a_cell_run_twice_is_explained_as_a_rerun_first(shell, capsys):
    shell.run_cell("%load_ext helpers", store_history=True)
    shell.run_cell("import torch\nx = torch.randn(3, requires_grad=True)", store_history=True)
    shell.run_cell("y = x.sigmoid() * 2", store_history=True)
    for _ in range(2):
        shell.run_cell("y.sum().backward()", store_history=True)
    assert shell.shown == []  # no autograd family: the re-run is the cause
    assert "This cell ran before" in capsys.readouterr().out
