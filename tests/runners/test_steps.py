"""`make test`'s step runner (tests/runners/steps.py): every test in exactly one step, failures
seen, the times printed."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runners import steps

ROOT = Path(__file__).resolve().parents[2]


def collect_all(tmp_path: Path) -> list[dict]:
    """Every test under tests/ with its markers (one collection,
    tests/support/collect_markers.py)."""
    out = tmp_path / "collected.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q",
         "-p", "tests.support.collect_markers", "tests"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
        env={**os.environ, "COLLECT_MARKERS_OUT": str(out)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def selects(args: list[str], test: dict) -> bool:
    """Whether `pytest -q ARGS` selects `test`: its paths, -m on markers, -k on the test's id
    (the expressions used in tests/runners/steps.py are Python's and/or/not of plain names)."""
    paths = [a for a in args if not a.startswith("-") and a.startswith("tests")]
    options = dict(itertools.pairwise(args))
    if not any(test["id"].startswith(p) for p in paths):
        return False
    if "-m" in options:
        names = set(re.findall(r"[a-z_]+", options["-m"])) - {"and", "or", "not"}
        if not eval(options["-m"], {}, {n: n in test["markers"] for n in names}):
            return False
    if "-k" in options:
        names = set(re.findall(r"[a-z_]+", options["-k"])) - {"and", "or", "not"}
        if not eval(options["-k"], {}, {n: n in test["id"] for n in names}):
            return False
    return True


def test_every_test_runs_in_exactly_one_step(tmp_path):
    everything = collect_all(tmp_path)
    assert len(everything) > 1000
    pytest_steps = [
        s
        for s in steps.test_steps()
        if s.command[1:3] == ["-m", "pytest"] and "--nbval" not in s.command
    ]
    for test in everything:
        chosen = [s.name for s in pytest_steps if selects(s.command[4:], test)]
        assert len(chosen) == 1, f"{test['id']} runs in {chosen or 'no step'}"
    names = {s.name for s in pytest_steps}
    assert names == {"unit", "notebook runs", "rerun", "browser-en", "browser-zh", "site"}


def test_the_selection_follows_markers_and_names():
    unit = ["tests", "-m", "not notebooks and not browser"]
    assert selects(unit, {"id": "tests/test_split.py::test_a", "markers": []})
    assert not selects(unit, {"id": "tests/test_faults.py::test_b", "markers": ["notebooks"]})
    zh = ["tests/browser/test_browser.py", "-k", "chinese_notebook"]
    assert selects(zh, {"id": "tests/browser/test_browser.py::test_chinese_notebook_runs[x]",
                        "markers": ["browser"]})  # fmt: skip
    assert not selects(zh, {"id": "tests/browser/test_site.py::test_chinese_notebook",
                            "markers": ["browser"]})  # fmt: skip


def test_the_nbval_steps_cover_both_editions_and_three_kernel_sets():
    nbval = [s for s in steps.test_steps() if "--nbval" in s.command]
    english = [p for p in nbval[0].command if p.endswith(".ipynb")]
    assert len(english) == len(list((ROOT / "notebooks").glob("[0-9]*.ipynb")))
    assert {s.env.get("ATEN_CPU_CAPABILITY") for s in nbval} == {None, "avx2", "default"}
    assert any(all("/zh/" in p for p in s.command if p.endswith(".ipynb")) for s in nbval)


def test_check_is_lint_and_the_unit_tests_only():
    assert [s.name for s in steps.check_steps()] == ["lint", "unit"]
    unit = next(s for s in steps.check_steps(workers=3) if s.name == "unit")
    assert unit.command[-3:] == ["not notebooks and not browser and not rerun", "-n", "3"]
    in_test = next(s for s in steps.test_steps() if s.name == "unit")
    assert unit.command[:-2] == in_test.command  # the same tests, spread over processes


def fake(name: str, code: str) -> steps.Step:
    return steps.Step(name, f"proves {name}", [sys.executable, "-c", code], expected=1)


def test_a_failing_step_fails_the_run_and_every_log_is_printed(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "LOGS", tmp_path)
    monkeypatch.setattr(steps, "ALL", [fake("good", "print('fine')"), fake("bad", "x")])
    assert steps.run(steps.ALL, jobs=2) == 1
    out = capsys.readouterr().out
    assert "===== good: ok in" in out and "===== bad: FAILED (exit 1) in" in out
    assert "fine" in out and "NameError" in out
    table = out[out.index("step  result") :].splitlines()
    assert table[1].startswith("good  ok") and table[2].startswith("bad   FAILED")
    assert table[3].startswith("all   FAILED") and "wall clock, 2 at a time" in table[3]


def test_a_passing_run_exits_zero(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "LOGS", tmp_path)
    monkeypatch.setattr(steps, "ALL", [fake("one", "pass"), fake("two", "pass")])
    assert steps.run(steps.ALL, jobs=1) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("all  ok")


def test_only_names_unknown_steps_and_lists_the_real_ones(capsys):
    with pytest.raises(SystemExit):
        steps.main(["test", "--only", "nbval-fr"])
    err = capsys.readouterr().err
    assert "no step named nbval-fr" in err and "nbval-zh" in err


def test_the_one_notebook_check_proves_that_notebook_in_both_editions():
    chosen = steps.notebook_steps("07b")
    names = [s.name for s in chosen]
    assert names[0] == "lint" and {"rerun", "browser", "notebook runs", "nbval-zh"} <= set(names)
    by_name = {s.name: s for s in chosen}
    kernels = {by_name[n].env.get("ATEN_CPU_CAPABILITY") for n in ("nbval-en", "nbval-en-avx2")}
    assert kernels | {by_name["nbval-zh"].env["ATEN_CPU_CAPABILITY"]} == {None, "avx2", "default"}
    english = "notebooks/07b_pipeline_and_data_parallel.ipynb"
    assert by_name["nbval-en-avx2"].command[-1] == english
    assert by_name["nbval-en-avx2"].env == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert by_name["nbval-zh"].command[-1] == "notebooks/zh/07b_pipeline_and_data_parallel.ipynb"
    for name in ("rerun", "browser", "notebook runs"):
        assert by_name[name].env == {"COURSE_NOTEBOOK": "07b_"}  # not 07_: that is another
    units = by_name["its helpers"].command
    assert "tests/ranks/test_launch.py" in units and "tests/exercises/test_nb07b.py" in units
    assert "tests/interactive/test_widgets.py" not in units  # 07b shows no explorer


def test_a_notebook_is_named_by_its_number_its_name_or_its_path():
    expected = steps.ROOT / "notebooks" / "06b_split_learning_deeper.ipynb"
    for name in (
        "06b",
        "06b_split_learning_deeper",
        "notebooks/zh/06b_split_learning_deeper.ipynb",
    ):
        assert steps.find_notebook(name) == expected
    with pytest.raises(SystemExit, match=r"no single notebook is called '6'.*06b"):
        steps.find_notebook("6")


def test_the_helpers_a_notebook_imports_map_to_their_tests():
    imported = steps.imported_helpers(steps.find_notebook("03"))
    assert {"helpers.interactive.widgets", "helpers.graph", "helpers.quiz"} <= imported
    assert {"helpers.state", "helpers.checks"} <= imported  # from `from helpers import ...`
    tests = steps.unit_tests_of({"helpers.interactive.widgets", "helpers.graph"})
    assert tests == ["tests/interactive/test_widgets.py", "tests/test_graph.py"]


def test_notebook_goes_with_test_only(capsys):
    with pytest.raises(SystemExit):
        steps.main(["check", "--notebook", "07b"])
    assert "--notebook goes with test" in capsys.readouterr().err


@pytest.mark.parametrize("chosen", [None, "07b"])
def test_only_the_steps_that_start_warm_kernels_find_their_spec(chosen):
    from tests.support.warm_kernel import KERNEL_NAME

    found = steps.notebook_steps(chosen) if chosen else steps.test_steps()
    for step in found:
        path = steps.step_environment(step).get("JUPYTER_PATH", "").split(os.pathsep)
        by_name = "--nbval-kernel-name" in step.command
        assert (str(steps.KERNELS) in path) == by_name, step.name
        if by_name:
            assert step.command[step.command.index("--nbval-kernel-name") + 1] == KERNEL_NAME
    # nbval: English as is and on AVX2, the twins on plain kernels
    assert sum("--nbval-kernel-name" in s.command for s in found) == 3


def test_steps_side_by_side_share_the_cores_out(monkeypatch):
    assert steps.threads_per_step(2, cores=2) == 1
    assert steps.threads_per_step(2, cores=8) == 4
    assert steps.threads_per_step(3, cores=2) == 1
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    step = steps.test_steps()[1]
    assert steps.step_environment(step, threads=1)["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in steps.step_environment(step)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the maintainer's own choice stands
    assert steps.step_environment(step, threads=1)["OMP_NUM_THREADS"] == "3"


def test_make_test_and_the_one_notebook_check_are_one_list_of_steps():
    """The one-notebook check is `make test`'s steps narrowed to one notebook, written once:
    every step of tests/runners/steps.py has a name of its own."""
    named = re.findall(r'Step\(\s*f?"([^"]+)"', (ROOT / "tests/runners/steps.py").read_text())
    assert len(named) == len(set(named)) >= 10, named
    whole = [s.name for s in steps.test_steps()]
    one = [s.name for s in steps.notebook_steps("07b")]
    assert whole[:2] == ["lint", "unit"] and whole[4:7] == ["browser-en", "site", "browser-zh"]
    assert one == ["lint", "its helpers", *whole[2:4], "browser", *whole[7:]]
