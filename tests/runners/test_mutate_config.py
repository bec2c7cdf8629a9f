"""`make mutate`'s configuration stays complete: every helper module is measured or left out with
a reason, and every listed test file exists."""

import pytest

from tests.runners import mutate


def test_every_helper_module_is_measured_or_left_out_with_a_reason():
    modules = {
        p.relative_to(mutate.ROOT).as_posix()
        for folder in ("helpers", "tooling")
        for p in (mutate.ROOT / folder).rglob("*.py")
    }
    modules.discard("helpers/exercises/__init__.py")
    unlisted = modules - set(mutate.MODULES) - set(mutate.LEFT_OUT)
    where = "MODULES or LEFT_OUT in tests/runners/mutate.py"
    assert not unlisted, f"add these to {where}: {sorted(unlisted)}"
    assert not set(mutate.MODULES) & set(mutate.LEFT_OUT)
    assert all(len(reason) > 20 for reason in mutate.LEFT_OUT.values())


def test_every_measured_module_has_existing_fast_tests():
    for module, tests in mutate.MODULES.items():
        assert (mutate.ROOT / module).exists(), module
        for test in tests:
            assert (mutate.ROOT / test).exists(), f"{module}: {test} does not exist"
            assert "run_all" not in test and "browser" not in test, "notebook runs are not fast"


def test_the_score_counts_killed_and_hung_mutants_as_caught_and_the_rest_as_survivors():
    result = mutate.ModuleResult(
        "helpers/state.py",
        {"a": "killed", "b": "survived", "c": "timeout", "d": "no tests", "e": "killed"},
    )
    assert result.caught == 3 and result.timed_out == 1
    assert result.survivors == ["b", "d"] and result.score == 0.6


def test_a_reason_for_a_mutant_that_no_longer_survives_is_reported_as_stale():
    results = [mutate.ModuleResult("helpers/state.py", {"a": "killed", "b": "survived"})]
    why = {
        "helpers/state.py": {"a": "was equivalent", "b": "is equivalent", "gone": "renumbered"},
        "helpers/graph.py": {"x": "not run this time"},
    }
    assert mutate.stale_reasons(results, why) == ["a", "gone"]


def test_the_committed_table_covers_every_module_meets_the_goal_and_explains_every_survivor():
    table = mutate.TABLE.read_text()
    rows = table.splitlines()
    for module in mutate.MODULES:
        row = next((line for line in rows if line.startswith(f"| `{module}` |")), None)
        if row is None:  # a new module: stale until `make mutate STALE=1` measures it
            continue
        assert row.split("|")[7].strip() == "yes", row
    assert "not explained yet" not in table
    assert "## Reasons with no survivor" not in table


def test_a_changed_module_marks_its_row_stale_and_fails_nothing(tmp_path, monkeypatch, capsys):
    """A stale row is an audit to run in the background, not a gate: `--stale` finds it."""
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "a.py").write_text("def f():\n    return 1\n")
    (tmp_path / "helpers" / "b.py").write_text("def g():\n    return 2\n")
    monkeypatch.setattr(mutate, "MODULES", {"helpers/a.py": [], "helpers/b.py": []})
    table = tmp_path / "MUTATION.md"
    monkeypatch.setattr(mutate, "TABLE", table)
    results = [mutate.ModuleResult(m, {"x": "killed"}) for m in mutate.MODULES]
    monkeypatch.setattr(mutate, "reasons", lambda: {})
    table.write_text(mutate.write_table(results, ""))
    assert mutate.stale_modules() == []
    (tmp_path / "helpers" / "b.py").write_text("def g():\n    return 3\n")
    assert mutate.stale_modules() == ["helpers/b.py"]
    measured = []
    monkeypatch.setattr(mutate, "mutate", lambda m: measured.append(m) or results[1])
    monkeypatch.setattr(mutate, "reread_configuration", lambda: None)
    mutate.main(["--stale"])
    assert measured == ["helpers/b.py"]
    assert "stale rows: helpers/b.py" in capsys.readouterr().out


def test_the_code_hash_ignores_imports_and_sees_the_code(tmp_path, monkeypatch):
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    (tmp_path / "helpers").mkdir()
    module = tmp_path / "helpers" / "m.py"
    module.write_text("import os\n\ndef f(x):\n    return x + 1\n")
    first = mutate.code_hash("helpers/m.py")
    moved = "from helpers.ranks import os\n\ndef f(x):\n    import sys\n    return x + 1\n"
    module.write_text(moved)
    assert mutate.code_hash("helpers/m.py") == first
    module.write_text("import os\n\ndef f(x):\n    return x - 1\n")
    assert mutate.code_hash("helpers/m.py") != first


def test_a_machine_without_mutmut_is_told_to_install_it(monkeypatch):
    monkeypatch.setattr(mutate.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(mutate, "scratch_for", lambda module: pytest.fail("no scratch copy"))
    with pytest.raises(SystemExit, match="mutmut is not installed here: `make mutate` installs"):
        mutate.mutate("helpers/state.py")


def test_the_table_follows_the_configuration_as_it_is_when_the_run_ends(tmp_path, monkeypatch):
    # A run that started before helpers/naming.py was added to MODULES: its row stays.
    monkeypatch.delitem(mutate.MODULES, "helpers/naming.py")
    table = tmp_path / "MUTATION.md"
    table.write_text(mutate.TABLE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(mutate, "TABLE", table)
    measured = mutate.ModuleResult("helpers/state.py", {"a": "killed"})
    monkeypatch.setattr(mutate, "mutate", lambda module: measured)
    assert mutate.main(["helpers/state.py"]) == 0
    rows = [line.split("|")[1].strip() for line in table.read_text().splitlines() if "|" in line]
    assert "`helpers/naming.py`" in rows and "`helpers/state.py`" in rows
    assert "`tooling/editions.py`" in rows  # a row of tooling/ is kept too
    assert "helpers/naming.py" in mutate.MODULES


def test_mutmut_copies_the_package_init_so_that_import_helpers_is_the_package(
    tmp_path, monkeypatch
):
    # mutmut runs the tests in its own copy holding only the mutated file and `also_copy`:
    # without helpers/__init__.py there, helpers is a namespace package and every test of
    # %load_ext helpers fails before a mutant runs (helpers/explain/ measured 0 of 47), and
    # without tooling and the notebooks 05b's tests cannot read its engine.
    import tomllib

    monkeypatch.setattr(mutate, "SCRATCH", tmp_path)
    for module in ("helpers/state.py", "helpers/explain/catalogue.py", "tooling/editions.py"):
        scratch = mutate.scratch_for(module)
        assert (scratch / "notebooks" / "05b_build_the_engine.ipynb").exists()  # what it copies
        config = tomllib.loads((scratch / "pyproject.toml").read_text())
        copied = config["tool"]["mutmut"]["also_copy"]
        assert {"helpers/__init__.py", "tooling", "notebooks"} <= set(copied), module
        assert len(copied) == len(set(copied)), module


OLD_TABLE = """\
### `helpers/state.py`

- equivalent: the same list either way:
  - `helpers.state.x_f__mutmut_3` (survived): `a = b \\| c`
  - `helpers.state.x_f__mutmut_4` (survived): `a = b`
- not explained yet:
  - `helpers.state.x_f__mutmut_9` (survived): `q = 1`
"""


def test_a_reason_follows_its_mutant_when_a_change_above_renumbers_it(tmp_path, monkeypatch):
    """Mutants 3 and 4 of x_f are now 5 and 6 (a mutant more above them): their reasons follow
    them by function and changed line; a survivor whose line was never explained gets none."""
    diffs = {"x_f__mutmut_5": "a = b | c", "x_f__mutmut_6": "a = b", "x_f__mutmut_7": "q = 1",
             "x_g__mutmut_3": "a = b"}  # fmt: skip
    monkeypatch.setattr(mutate, "survivor_diff", lambda module, name: diffs[name.split(".")[-1]])
    new = {f"helpers.state.{n}": "survived" for n in diffs}
    results = [mutate.ModuleResult("helpers/state.py", new)]
    why = {"helpers/state.py": {f"helpers.state.x_f__mutmut_{n}": "same" for n in (3, 4)}}
    renamed = mutate.carried_reasons(results, OLD_TABLE, why)
    assert renamed == {
        "helpers.state.x_f__mutmut_3": "helpers.state.x_f__mutmut_5",
        "helpers.state.x_f__mutmut_4": "helpers.state.x_f__mutmut_6",
    }
    reasons = tmp_path / "reasons.toml"
    reasons.write_text(
        '["helpers/state.py"]\n"helpers.state.x_f__mutmut_3" = "same"\n'
        '"helpers.state.x_f__mutmut_4" = "same"\n'
    )
    monkeypatch.setattr(mutate, "REASONS", reasons)
    mutate.rename_reasons(renamed)
    assert set(mutate.reasons()["helpers/state.py"]) == set(renamed.values())


def test_a_reason_is_not_carried_onto_a_name_that_has_a_reason_of_its_own(monkeypatch):
    monkeypatch.setattr(mutate, "survivor_diff", lambda module, name: "a = b")
    results = [mutate.ModuleResult("helpers/state.py", {"helpers.state.x_f__mutmut_5": "survived"})]
    why = {"helpers/state.py": {"helpers.state.x_f__mutmut_4": "same"},
           "helpers/graph.py": {"helpers.state.x_f__mutmut_5": "clash"}}  # fmt: skip
    assert mutate.carried_reasons(results, OLD_TABLE, why) == {}
