"""Every code cell of every notebook, and of three Chinese twins, run twice in a row (Shift-Enter
twice): each error says what happened in the notebook's language, and doing what it says works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.language import translated_table
from tests.support.notebook_files import CHOSEN, chosen_twins

pytestmark = pytest.mark.rerun

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tests" / "support" / "run_twice.py"
#: The twins run twice: those whose cells raise the most kinds of re-run error (05 frees graphs,
#: 02 and 04 accumulate and hook). Every twin runs the same code as its English notebook
#: (tests/tooling/test_editions.py), whose every cell runs twice here; what a twin adds is the
#: explanation's words, in Chinese (tests/test_rerun.py checks each of them).
TWINS_RUN_TWICE = ("02_", "04_", "05_")
ZH = chosen_twins(TWINS_RUN_TWICE)


def run_twice(paths: list[Path]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(RUNNER), *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(done.stdout)


def unexplained(results: list[dict], language: str) -> list[str]:
    header = translated_table("common", "rerun", language)["header"]
    problems = []
    for result in results:
        name = Path(result["notebook"]).name
        for e in result["errors"]:
            where = f"{name} cell {e['cell']} (run {e['run']}, {e['ename']})"
            if not e["shown"].startswith(header):
                problems.append(f"{where}: no explanation:\n{e['shown'][-800:]}")
            elif e["advice_works"] is False:
                problems.append(f"{where}: doing what it says did not make the cell run")
    return problems


def test_a_small_notebook_run_twice(tmp_path):
    cells = [
        "%load_ext helpers\nimport torch\nw = torch.ones(2, requires_grad=True)",
        "loss = (w * 3).sum()",
        "loss.backward()\nassert w.grad.tolist() == [3.0, 3.0]",
        "undefined_name",  # the learner's own error: IPython's usual traceback
        # the kernel talks over Unix sockets (tests/support/kernel_sockets.py); over TCP this cell
        # fails
        "import json\nfrom ipykernel import get_connection_info\n"
        "assert json.loads(get_connection_info())['transport'] == 'ipc'",
    ]
    path = tmp_path / "small.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=list(map(nbformat.v4.new_code_cell, cells))), path
    )
    (result,) = run_twice([path])
    found = [(e["cell"], e["run"], e["ename"], e["advice_works"]) for e in result["errors"]]
    cell_ids = [c.id for c in nbformat.read(path, 4).cells]
    assert found == [
        (cell_ids[2], 2, "RuntimeError", True),
        (cell_ids[3], 1, "NameError", None),
        (cell_ids[3], 2, "NameError", None),
    ]
    backward_twice = result["errors"][0]["shown"].splitlines()
    assert backward_twice[0] == "What happened:" and len(backward_twice) == 5
    assert "run In [2] again, the cell that makes `w`" in backward_twice[-1]
    name_error = result["errors"][1]["shown"]
    assert "What happened" not in name_error and "NameError" in name_error


def test_every_english_notebook_run_twice_explains_itself():
    assert unexplained(run_twice(CHOSEN), "en") == []


def test_every_chinese_twin_run_twice_explains_itself():
    assert all(p.exists() for p in ZH), "a twin is missing: make zh"
    assert unexplained(run_twice(ZH), "zh") == []
