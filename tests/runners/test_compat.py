"""The compatibility table (COMPATIBILITY.md, made by `make compat`) is current and true, and the
compatibility run's bookkeeping works. `make compat` itself downloads several GB per torch release,
so it is not part of `make test`; these tests check its table and its bookkeeping (a row that went
stale is found and run again).
"""

import json
import re
from pathlib import Path

import pytest
import tomllib

from tests.runners import compat
from tests.support.notebook_files import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    assert compat.TABLE.exists(), "COMPATIBILITY.md is missing: run `make compat`"
    return compat.read_table(compat.TABLE.read_text(encoding="utf-8"))


def test_table_has_rows_only_for_notebooks_that_exist(table):
    # a row whose code changed since is stale, and so is a new notebook's missing row, which
    # fails nothing: `make compat --stale` runs them
    assert set(table["hashes"]) <= {p.name for p in NOTEBOOKS}
    missing = {p.name for p in NOTEBOOKS} - set(table["hashes"])
    assert {p.name for p in compat.stale_notebooks(compat.TABLE.read_text())} >= missing


def test_every_release_in_the_table_passed_everything(table):
    assert table["versions"] == list(compat.VERSIONS)
    for name, cells in table["cells"].items():
        assert len(cells) == len(table["versions"]), name
        for version, cell in zip(table["versions"], cells, strict=True):
            assert cell.startswith("pass "), f"{name} on torch {version}: {cell}"
    assert len(table["unit"]) == len(table["versions"])
    assert all(c.startswith("pass: ") and " passed" in c for c in table["unit"]), table["unit"]
    colab = dict(zip(table["versions"], table["colab"], strict=True))
    assert colab[compat.COLAB_VERSION].startswith("pass ("), colab
    assert colab[compat.COLAB_VERSION].endswith(f", Python {compat.COLAB_PYTHON})"), colab


def test_pyproject_floor_is_the_oldest_release_tried(table):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = [d.split("#")[0].strip() for d in project["dependencies"] if d.startswith("torch>=")]
    assert floors == [f"torch>={table['versions'][0]}"]
    as_numbers = [tuple(map(int, compat.torch_of(v).split("."))) for v in table["versions"]]
    assert as_numbers == sorted(as_numbers), "oldest first"


def test_readme_names_the_releases_tried_and_links_the_table(table):
    readme = (ROOT / "README.md").read_text()
    assert "(COMPATIBILITY.md)" in readme
    for version in table["versions"]:
        assert f"torch {version}" in readme, version


# --- the bookkeeping, without downloading anything --------------------------------------------


def _notebook(tmp_path, cells):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    return path


def _code(source, outputs=()):
    return {"cell_type": "code", "source": source, "outputs": list(outputs)}


def test_code_hash_follows_code_only(tmp_path):
    base = [_code("x = 1\n"), {"cell_type": "markdown", "source": "prose"}, _code(["y = ", "2"])]
    first = compat.code_hash(_notebook(tmp_path, base))
    prose = [base[0], {"cell_type": "markdown", "source": "other prose"}, base[2]]
    outputs = [_code("x = 1\n", [{"text": "1"}]), base[1], base[2]]
    assert compat.code_hash(_notebook(tmp_path, prose)) == first
    assert compat.code_hash(_notebook(tmp_path, outputs)) == first
    assert compat.code_hash(_notebook(tmp_path, [_code("x = 2\n"), *base[1:]])) != first
    assert compat.code_hash(_notebook(tmp_path, [base[2], base[1], base[0]])) != first  # order


def test_constraints_drop_torch_and_what_torch_brought():
    text = compat.constraints_without({"sympy", "typing-extensions"})
    names = {line.split("==")[0].lower() for line in text.splitlines() if "==" in line}
    assert "torch" not in names and "sympy" not in names and "typing_extensions" not in names
    assert {"numpy", "ipywidgets", "nbval"} <= names  # the course's pins stay


def test_torch_index_can_be_overridden():
    plain = compat.torch_install_args("2.11.0", None)
    assert "torch==2.11.0" in plain and "--index-url" not in plain
    cpu = compat.torch_install_args("2.11.0", "https://download.pytorch.org/whl/cpu")
    assert cpu[cpu.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"


def test_every_environment_gets_its_packages_through_one_pip_install(monkeypatch):
    """compat's environments and the Colab emulation's (tests/test_colab_emulation.py) install
    with `compat.pip_install`: pip's command line is written once."""
    ran = []
    monkeypatch.setattr(compat, "_run", lambda command, timeout, **kw: ran.append(command))
    compat.pip_install(Path("/env/bin/python"), ["torch==2.11.0"], 60)
    assert ran == [
        ["/env/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "torch==2.11.0"]
    ]  # fmt: skip
    files = ("tests/runners/compat.py", "tests/test_colab_emulation.py")
    installs = [(ROOT / f).read_text(encoding="utf-8").count('"install"') for f in files]
    assert installs == [1, 0]  # pip_install's own line, and nothing else


def test_a_notebook_fails_on_an_error_or_on_stderr():
    ok = compat.judge({"notebook": "a", "error": None, "stderr": [], "seconds": 2.5})
    assert ok.ok and compat.cell(ok) == "pass 2.5 s"
    error = compat.judge(
        {
            "notebook": "a",
            "error": "Traceback\n\x1b[0;31mRuntimeError\x1b[0m: Found dtype Long\n",
            "stderr": [],
            "seconds": 1.0,
        }
    )
    assert not error.ok and error.problem == "RuntimeError: Found dtype Long"
    warned = compat.judge({"notebook": "a", "error": None, "stderr": ["W: old\n"], "seconds": 1})
    assert not warned.ok and warned.problem == "stderr: W: old"


def test_table_round_trip_and_failures_listed():
    names = [p.name for p in NOTEBOOKS]
    passing = [compat.NotebookResult(n, True, 1.0) for n in names]
    failing = [compat.NotebookResult(names[0], False, 2.0, "RuntimeError: boom"), *passing[1:]]
    results = [
        compat.VersionResult("2.4.1", notebooks=passing, unit="3 passed", unit_ok=True),
        compat.VersionResult(
            "2.11.0",
            notebooks=failing,
            unit="1 failed, 2 passed",
            unit_ok=False,
            colab=passing,
        ),
    ]
    assert results[0].ok and not results[1].ok
    text = compat.render_table(results, "2026-11-30", "Linux x86_64")
    assert compat.GENERATED in text and "2026-11-30" in text
    read = compat.read_table(text)
    assert read["versions"] == ["2.4.1", "2.11.0"]
    assert read["hashes"] == {p.name: compat.code_hash(p) for p in NOTEBOOKS}
    assert read["cells"][names[0]] == ["pass 1.0 s", "FAIL 2.0 s"]
    assert read["unit"] == ["pass: 3 passed", "FAIL: 1 failed, 2 passed"]
    assert read["colab"][0] == "—" and read["colab"][1].startswith("pass (")
    assert re.search(rf"torch 2\.11\.0, {re.escape(names[0])}: RuntimeError: boom", text)


def test_versions_are_listed_oldest_first_with_colabs_among_them():
    numbers = [tuple(map(int, compat.torch_of(v).split("."))) for v in compat.VERSIONS]
    assert numbers == sorted(numbers)
    assert compat.COLAB_VERSION in compat.VERSIONS
    assert compat.PIN not in map(compat.torch_of, compat.VERSIONS)  # make test proves the pin


def test_the_newest_release_also_runs_on_colabs_python_or_a_newer_one():
    newest = compat.torch_of(list(compat.VERSIONS)[-1])
    pythons = {compat.python_of(v) for v in compat.VERSIONS if compat.torch_of(v) == newest}
    assert compat.COURSE_PYTHON in pythons

    def number(version):
        return tuple(map(int, version.split(".")))

    assert max(map(number, pythons)) >= number(compat.COLAB_PYTHON)


@pytest.mark.parametrize(
    ("run", "torch", "python", "home"),
    [
        ("2.4.1", "2.4.1", "3.11", "torch-2.4.1"),
        ("2.15.0 on Python 3.13", "2.15.0", "3.13", "torch-2.15.0-py3.13"),
    ],
)
def test_a_run_names_its_torch_and_its_python(run, torch, python, home):
    assert (compat.torch_of(run), compat.python_of(run)) == (torch, python)
    assert compat.env_home(run) == compat.HOME / home


def test_a_python_the_machine_lacks_is_named_with_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(compat.CompatError, match=r"Python 3\.99 is not on this machine.*pyenv"):
        compat.find_python("3.99")


def test_the_colab_emulation_says_its_python():
    run = compat.VersionResult("2.11.0", colab=[compat.NotebookResult("00_x.ipynb", True, 2.0)])
    assert compat._colab_cell(run) == f"pass (1 notebooks, 2 s, Python {compat.COLAB_PYTHON})"


def test_unit_tests_run_by_compat_are_every_test_file_but_the_named_exceptions():
    found = [p for p in (ROOT / "tests").rglob("test_*.py") if "browser" not in p.parts]
    names = {p.name for p in found}
    assert set(compat.NOT_UNIT) <= names, set(compat.NOT_UNIT) - names  # no stale exception
    expected = {p.relative_to(ROOT).as_posix() for p in found if p.name not in compat.NOT_UNIT}
    assert set(compat.UNIT_TESTS) == expected
    assert all(reason for reason in compat.NOT_UNIT.values())


def test_a_stale_row_is_found_and_rewritten_from_its_own_runs():
    from tests.runners import compat

    first, second = compat.NOTEBOOKS[0], compat.NOTEBOOKS[1]
    table = (
        f"| `{first.name}` | `000000000000` | pass 1.0 s |\n"
        f"| `{second.name}` | `{compat.code_hash(second)}` | pass 2.0 s |\n"
        "| helpers' unit tests | | pass: 1 passed |\n"
    )
    assert compat.stale_notebooks(table)[0] == first
    assert second not in compat.stale_notebooks(table)
    run = compat.VersionResult("2.4.1")
    run.notebooks = [compat.NotebookResult(first.name, True, 3.5, "")]
    rewritten = compat.update_rows(table, [run]).splitlines()
    assert rewritten[0] == f"| `{first.name}` | `{compat.code_hash(first)}` | pass 3.5 s |"
    assert rewritten[1:] == table.splitlines()[1:]  # the other rows as they were


def test_a_notebook_new_to_the_table_gets_its_row_in_course_order():
    from tests.runners import compat

    first, middle, last = compat.NOTEBOOKS[0], compat.NOTEBOOKS[1], compat.NOTEBOOKS[2]
    table = (
        "| notebook | code | 2.4.1 |\n"
        "|---|---|---|\n"
        f"| `{first.name}` | `{compat.code_hash(first)}` | pass 1.0 s |\n"
        f"| `{last.name}` | `{compat.code_hash(last)}` | pass 2.0 s |\n"
        "| helpers' unit tests | | pass: 1 passed |\n"
    )
    assert middle in compat.stale_notebooks(table)  # no row yet: due
    for new, where in ((middle, 3), (compat.NOTEBOOKS[-1], 4)):
        run = compat.VersionResult("2.4.1")
        run.notebooks = [compat.NotebookResult(new.name, True, 3.5, "")]
        rewritten = compat.update_rows(table, [run]).splitlines()
        assert rewritten[where] == f"| `{new.name}` | `{compat.code_hash(new)}` | pass 3.5 s |"
        assert rewritten[:where] + rewritten[where + 1 :] == table.splitlines()
