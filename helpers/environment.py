"""What the course runs on: versions of the packages it uses and whether `dot` is there."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys

from helpers.display import Table
from helpers.graph import dot_available

__all__ = ["environment_ok", "environment_report"]

PACKAGES = ["torch", "torchviz", "graphviz", "matplotlib", "ipywidgets", "numpy"]


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
        status = "ok" if version else "missing: run the notebook's first cell or `make install`"
        rows.append({"component": package, "version": version or "-", "status": status})
    dot = _dot_version()
    rows.append(
        {
            "component": "dot (graphviz program)",
            "version": dot or "-",
            "status": "ok" if dot else "missing: graphs are shown as text (see the README)",
        }
    )
    where = "Google Colab" if in_colab else "a local or Binder Jupyter kernel"
    return Table(["component", "version", "status"], rows, title=f"Running on {where}")


def environment_ok(report: Table | None = None) -> bool:
    """True when every component of the report is present."""
    report = report or environment_report()
    return all(r["status"] == "ok" for r in report.rows)
