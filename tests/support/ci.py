"""What a test does when something it needs is missing: skip on a learner's machine, fail in CI."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["skip_or_fail"]


def skip_or_fail(message: str) -> NoReturn:
    """Skip a test whose requirement is missing; in CI (CI=true), fail it instead.

    The README promises what `make test` checks (the browser run, the offline run): in CI a
    missing browser or network namespace is a broken machine, not a reason to report green.
    """
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: this check is required in CI)", pytrace=False)
    pytest.skip(message)
