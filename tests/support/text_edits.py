"""For tests that prove a helper's text comes from its data file: edit the file's strings."""

from __future__ import annotations

import pytest

from helpers import language


def edit_feedback(monkeypatch: pytest.MonkeyPatch, name: str, strings: dict[str, str]) -> None:
    """Make `helpers.language` read `strings` in place of those English strings of [feedback] in
    helpers/text/en/<name>.toml, for the rest of the test."""
    real = language._file

    def edited(code: str, file: str):
        data = real(code, file)
        if (code, file) != ("en", name):
            return data
        return {**data, "feedback": {**data["feedback"], **strings}}

    monkeypatch.setattr(language, "_file", edited)
