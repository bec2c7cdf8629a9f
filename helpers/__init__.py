"""Helpers for the autograd-notebooks course: they draw, tabulate and check, so notebooks stay
about autograd.

    from helpers import show_graph, tensor_state, snapshot, param_diff, expect_error

Submodules load on first use, so `import helpers` costs little more than nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The public helpers, each with the submodule it lives in: the one list to extend.
_HOME = {
    "AutogradGraph": "graph",
    "autograd_graph": "graph",
    "dot_available": "graph",
    "show_graph": "graph",
    "tensor_state": "state",
    "snapshot": "params",
    "param_diff": "params",
    "show_param_diff": "params",
    "CheckResult": "checks",
    "expect_error": "checks",
    "expect_warning": "checks",
    "feedback": "checks",
    "Table": "display",
    "environment_report": "environment",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f"helpers.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext helpers`: errors in this kernel's cells explain themselves, autograd's by their
    family and line (`helpers.explain`), a cell run twice by its cause (`helpers.rerun`)."""
    from helpers.explain.kernel import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """`%unload_ext helpers`: IPython's own tracebacks again."""
    from helpers.explain.kernel import unload

    unload(ipython)
