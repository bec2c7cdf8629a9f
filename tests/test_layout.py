"""helpers/ reads like the course: grouped by topic, its imports on few floors and without a
cycle, and no private name crossing from one module into another (tests/support/layout.py reads the
imports, top-level and inside functions alike)."""

from __future__ import annotations

import re

import pytest

from tests.support import layout


def test_no_private_name_crosses_from_one_module_into_another():
    assert layout.private_crossings() == []


def test_the_imports_have_no_cycle():
    layout.floors()  # raises, naming the cycle


def test_each_subpackage_opens_with_one_line_that_says_what_lives_there():
    for package in layout.subpackages():
        doc = (package / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""'), package.name
        first = doc[3:].splitlines()[0].removesuffix('"""')
        assert len(first) > 20 and first.endswith((".", ":")), (package.name, first)


def test_the_reader_of_imports_sees_what_it_must(tmp_path, monkeypatch):
    """A private name imported inside a function, a relative import and a cycle are all seen."""
    helpers = tmp_path / "helpers"
    (helpers / "pack").mkdir(parents=True)
    (helpers / "__init__.py").write_text("")
    (helpers / "pack" / "__init__.py").write_text('"""A package."""\n')
    (helpers / "a.py").write_text("def f():\n    from helpers.b import _hidden\n")
    (helpers / "b.py").write_text("from helpers.pack.c import thing\n_hidden = 1\n")
    (helpers / "pack" / "c.py").write_text("from . import d\nthing = 2\n")
    (helpers / "pack" / "d.py").write_text("from helpers import a\n")
    monkeypatch.setattr(layout, "ROOT", tmp_path)
    monkeypatch.setattr(layout, "HELPERS", helpers)
    layout.modules.cache_clear()
    try:
        assert layout.private_crossings() == ["helpers.a imports _hidden from helpers.b"]
        assert layout.arrows()["helpers.pack.c"] == {"helpers.pack.d"}
        with pytest.raises(ValueError, match=r"an import cycle: helpers\.a -> helpers\.b"):
            layout.floors()
    finally:
        layout.modules.cache_clear()


#: The issue's measure of a flat package that grew: at most this many modules beside the topic
#: subpackages, and imports at most this many floors high.
MOST_TOP_LEVEL_MODULES = 20
MOST_FLOORS = 7


def test_helpers_top_level_holds_at_most_twenty_modules_beside_its_subpackages():
    top = layout.top_level_modules()
    assert len(top) <= MOST_TOP_LEVEL_MODULES, top


def test_the_imports_stand_at_most_seven_floors_high():
    floors = layout.floors()
    high = {m: f for m, f in floors.items() if f > MOST_FLOORS}
    assert not high, f"more than {MOST_FLOORS} floors: {high}"


def test_tests_mirror_helpers():
    """Each subpackage of helpers/ has its tests in the folder of the same name in tests/, and a
    test named after a module found only in a subpackage lives in that subpackage's folder."""
    tests = layout.ROOT / "tests"
    helpers = layout.HELPERS
    for package in layout.subpackages():
        assert (tests / package.name / "__init__.py").exists(), f"tests/{package.name}/"
    stray = []
    for test in tests.glob("test_*.py"):
        module = test.stem.removeprefix("test_")
        homes = [p.parent.name for p in helpers.glob(f"*/{module}.py")]
        if homes and not (helpers / f"{module}.py").exists():
            stray.append(f"tests/{test.name} -> tests/{homes[0]}/")
    assert not stray, stray


def test_the_runners_behind_make_targets_live_in_tests_runners():
    """`make test`, `check`, `bench`, `compat` and `mutate` run modules of tests/runners/ only."""
    makefile = (layout.ROOT / "Makefile").read_text()
    modules = set(re.findall(r"-m (tests\.[\w.]+)", makefile))
    assert {"tests.runners.steps", "tests.runners.compat", "tests.runners.mutate"} <= modules
    elsewhere = sorted(m for m in modules if not m.startswith("tests.runners."))
    assert not elsewhere, f"move these runners into tests/runners/: {elsewhere}"


@pytest.mark.parametrize("document", ["CONTRIBUTING.md", "README.md", "README.zh.md", "Makefile"])
def test_every_test_file_a_document_names_exists(document):
    """A moved test or runner leaves no stale path behind in the maintainers' documents."""
    text = (layout.ROOT / document).read_text()
    named = set(re.findall(r"\btests/[\w/]+\.(?:py|toml|cfg|json)\b", text))
    missing = sorted(p for p in named if not (layout.ROOT / p).exists())
    assert not missing, f"{document} names files that are not there: {missing}"
