"""helpers.environment: the setup check of notebook 00, torch's tested range above all."""

import pytest

from helpers import environment
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


@pytest.mark.parametrize(
    ("version", "status"),
    [
        ("2.4.1", "ok"),
        ("2.13.0+cpu", "ok"),
        ("2.15.0+cu132", "ok"),
        ("2.4.0", "older than 2.4.1, the oldest release the course is tested on: upgrade torch"),
        ("1.13.1", "older than 2.4.1, the oldest release the course is tested on: upgrade torch"),
        ("2.16.0", "ok, newer than 2.15.0 (the newest tested): a printed digit may differ"),
        (None, environment.MISSING),
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
    assert torch_row == {"component": "torch", "version": "-", "status": environment.MISSING}
