"""A missing Chromium skips the browser tests on a learner's machine, and fails them in CI.

No browser is needed here: the environment and the Chromium path are replaced for each test.
"""

import pytest

from tests.browser import conftest

pytestmark = pytest.mark.browser


@pytest.fixture
def no_chromium(tmp_path, monkeypatch):
    missing = tmp_path / "no-chromium-here"
    monkeypatch.setattr(conftest, "CHROMIUM", missing)
    return missing


@pytest.mark.parametrize("ci", [None, "false", "1"])
def test_outside_ci_a_missing_chromium_skips_and_says_how_to_install(no_chromium, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium") as caught:
        conftest.require_chromium()
    assert str(no_chromium) in str(caught.value)


def test_in_ci_a_missing_chromium_fails(no_chromium, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true: this check is required in CI") as err:
        conftest.require_chromium()
    assert str(no_chromium) in str(err.value) and "apt-get install chromium" in str(err.value)


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_present_chromium_is_used(tmp_path, monkeypatch, ci):
    chromium = tmp_path / "chromium"
    chromium.write_text("")
    monkeypatch.setattr(conftest, "CHROMIUM", chromium)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert conftest.require_chromium() == chromium
