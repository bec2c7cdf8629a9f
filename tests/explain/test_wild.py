"""The explainer on autograd errors from public threads (tests/explain/wild/, measured by
`python -m tests.runners.wild`): at least nine in ten named with their family and causal line,
and WILD.md exactly what the runner makes now, so the published table cannot drift."""

from __future__ import annotations

import pytest

from helpers.explain import FAMILIES
from tests.runners import wild

#: The share of reports that must be named right (family and causal line).
THRESHOLD = 0.9

WORDS = {family.key: family.words for family in FAMILIES}


@pytest.fixture(scope="module")
def results():
    return wild.measure()


def test_the_set_holds_thirty_reports_each_from_its_own_thread():
    reports = wild.reports()
    assert len(reports) >= 30
    assert len({r.address for r in reports}) >= 30  # a thread may give two errors, not more
    assert all(r.address.startswith("https://") and r.title and r.what for r in reports)


def test_each_report_raises_the_error_of_the_family_it_states(results):
    for r in results:
        assert r.report.family in WORDS, r.report.name
        assert WORDS[r.report.family] in r.message, (r.report.name, r.message)


def test_at_least_nine_in_ten_are_named_with_their_family_and_causal_line(results):
    right = [r for r in results if r.named_right]
    assert len(right) >= THRESHOLD * len(results), wild.render(results)


def test_wild_md_is_what_the_runner_makes_now(results):
    assert wild.TABLE.read_text() == wild.render(results), (
        "WILD.md is stale: run python -m tests.runners.wild"
    )


def test_both_readmes_give_the_share_measured_now(results):
    right, total = sum(r.named_right for r in results), len(results)
    percent = f"{100 * right / total:.0f}%"
    english = (wild.ROOT / "README.md").read_text()
    chinese = (wild.ROOT / "README.zh.md").read_text()
    assert wild.share(right, total) in " ".join(english.split()), "README.md's share is stale"
    assert f"{total} 个中的 {right} 个（{percent}）" in chinese, "README.zh.md's share is stale"
