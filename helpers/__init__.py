"""Helpers for the autograd-notebooks course: they draw, tabulate and check, so notebooks stay
about autograd.

    from helpers import show_graph, tensor_state, snapshot, param_diff, expect_error

Submodules load on first use, so `import helpers` costs little more than nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "AutogradGraph",
    "CheckResult",
    "Table",
    "autograd_graph",
    "dot_available",
    "environment_report",
    "expect_error",
    "expect_warning",
    "feedback",
    "param_diff",
    "show_graph",
    "show_param_diff",
    "snapshot",
    "tensor_state",
]

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

if TYPE_CHECKING:
    from helpers.checks import CheckResult, expect_error, expect_warning, feedback
    from helpers.display import Table
    from helpers.environment import environment_report
    from helpers.graph import AutogradGraph, autograd_graph, dot_available, show_graph
    from helpers.params import param_diff, show_param_diff, snapshot
    from helpers.state import tensor_state


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f"helpers.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
