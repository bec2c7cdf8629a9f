"""helpers.environment: the setup check of notebook 00, torch's tested range above all."""

import re

import pytest

from helpers import environment
from helpers.language import set_language
from tests.runners import compat


def test_tested_range_is_the_compatibility_runs_oldest_and_newest():
    oldest, *_, newest = map(compat.torch_of, compat.VERSIONS)
    assert environment.TORCH_TESTED == (oldest, newest)


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ("2.13.0+cpu", (2, 13, 0)),
        ("2.13", (2, 13, 0)),
        ("2.14.0a0+git12ab", (2, 14, 0)),
        ("3", (3, 0, 0)),
    ],
)
def test_release_numbers_ignore_local_and_pre_release_parts(version, release):
    assert environment._release(version) == release


def test_a_version_that_is_no_number_is_refused():
    with pytest.raises(ValueError, match="not a version number: 'nightly'"):
        environment._release("nightly")


MISSING = "missing: run the notebook's first cell or `make install`"


@pytest.mark.parametrize(
    ("version", "status"),
    [
        ("2.4.1", "ok"),
        ("2.13.0+cpu", "ok"),
        ("2.15.0+cu132", "ok"),
        ("2.4.0", "older than 2.4.1, the oldest release the course is tested on: upgrade torch"),
        ("1.13.1", "older than 2.4.1, the oldest release the course is tested on: upgrade torch"),
        ("2.16.0", "ok, newer than 2.15.0 (the newest tested): a printed digit may differ"),
        (None, MISSING),
    ],
)
def test_torch_status_says_whether_the_release_is_tested(version, status):
    assert environment.torch_status(version) == status


def test_report_rows_carry_torchs_status(monkeypatch):
    versions = {"torch": "2.3.1"}
    monkeypatch.setattr(environment, "_version", lambda package: versions.get(package, "1.0"))
    report = environment.environment_report()
    torch_row = next(r for r in report.rows if r["component"] == "torch")
    assert torch_row["version"] == "2.3.1" and torch_row["status"].startswith("older than 2.4.1")
    versions["torch"] = None
    report = environment.environment_report()
    torch_row = next(r for r in report.rows if r["component"] == "torch")
    assert torch_row == {"component": "torch", "version": "-", "status": MISSING}


def test_in_the_chinese_edition_a_status_that_is_not_ok_is_said_in_chinese(monkeypatch):
    """00's check speaks English exactly when something is wrong unless every status is said."""
    monkeypatch.setattr(environment, "_version", lambda package: None)
    monkeypatch.setattr(environment, "_dot_version", lambda: None)
    set_language("zh")
    try:
        report = environment.environment_report()
        older, newer = environment.torch_status("1.13.1"), environment.torch_status("9.0")
        shown = repr(report)
    finally:
        set_language("en")
    statuses = [r["status"] for r in report.rows[1:]] + [older, newer]
    assert all(re.search(r"[\u4e00-\u9fff]", s) for s in statuses), statuses
    assert newer.startswith("ok")  # 00 reads a status that starts with "ok" as fine
    assert "dot（graphviz 程序）" in shown and "graphviz program" not in shown
