"""What the course runs on: versions of the packages it uses, whether `dot` is there, and whether
torch is a release the course is tested on."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import subprocess
import sys

from helpers.display import Table
from helpers.graph import dot_available
from helpers.language import say

__all__ = ["TORCH_TESTED", "environment_report", "torch_status"]

PACKAGES = ["torch", "torchviz", "graphviz", "matplotlib", "ipywidgets", "numpy"]
#: The oldest and newest torch releases `make compat` runs the course on (COMPATIBILITY.md);
#: tests/runners/test_compat.py checks that they agree with that table.
TORCH_TESTED = ("2.4.1", "2.15.0")


def _release(version: str) -> tuple[int, ...]:
    """(2, 13, 0) from "2.13.0+cpu", "2.13.0a0+git1234" or "2.13"."""
    numbers = re.match(r"\d+(\.\d+)*", version)
    if numbers is None:
        raise ValueError(f"not a version number: {version!r}")
    parts = tuple(int(n) for n in numbers.group(0).split("."))
    return (parts + (0, 0))[:3]


def torch_status(version: str | None) -> str:
    """The status column for torch: "ok", or what is wrong and what to do (in the learner's
    language; a status that is fine starts with "ok" in every language)."""
    if not version:
        return say("common", "environment.missing")
    oldest, newest = TORCH_TESTED
    if _release(version) < _release(oldest):
        return say("common", "environment.older", oldest=oldest)
    if _release(version) > _release(newest):
        return say("common", "environment.newer", newest=newest)
    return "ok"


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _dot_version() -> str | None:
    if not dot_available():
        return None
    done = subprocess.run(["dot", "-V"], capture_output=True, text=True, timeout=10, check=False)
    return (done.stderr or done.stdout).strip().removeprefix("dot - ") or "unknown"


def environment_report() -> Table:
    """A table: Python, each package the course uses, and the `dot` program, with versions."""
    in_colab = "google.colab" in sys.modules
    rows = [{"component": "python", "version": platform.python_version(), "status": "ok"}]
    for package in PACKAGES:
        version = _version(package)
        status = "ok" if version else say("common", "environment.missing")
        if package == "torch":
            status = torch_status(version)
        rows.append({"component": package, "version": version or "-", "status": status})
    dot = _dot_version()
    rows.append(
        {
            "component": "dot (graphviz program)",
            "version": dot or "-",
            "status": "ok" if dot else say("common", "environment.dot_missing"),
        }
    )
    where = say("common", "environment.colab" if in_colab else "environment.local")
    title = say("common", "environment.running_on", where=where)
    return Table(["component", "version", "status"], rows, title=title)
