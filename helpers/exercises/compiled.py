"""Checker for notebook 09c's exercise: the same loss and the same gradients, in one graph.

The notebook's `normalised_loss(x, w)` divides the loss by its own value when it is above 1,
reading that value with `.item()`: Python decides, so torch.compile breaks the graph there.
`check_one_graph(one_graph)` wants the learner's version: the same value and the same gradient
for `w` as the original, on an input whose loss is above 1 and one whose loss is below, and no
graph break (torch's own count, `torch._dynamo.explain`). The divisor the original builds with
`.item()` is a constant for autograd, so a tensor divisor must be detached: the checker says so
when the gradient is the one a divisor with a gradient gives. It never raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.checks import (
    CheckResult,
    error_line,
    feedback,
    only_a_placeholder,
)
from helpers.compiled_graphs import compile_report
from helpers.language import say

__all__ = ["cases", "check_one_graph", "normalised_loss"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "09c_torch_compile_and_autograd"


def normalised_loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The notebook's function: a loss divided by its own value when that is above 1."""
    loss = torch.tanh(x @ w).pow(2).sum()
    if loss.item() > 1.0:  # Python reads the value: a graph break
        loss = loss / loss.item()
    return loss


def cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """Two seeded inputs: one whose loss is above 1, one whose loss is below (named by the key of
    their words in [feedback]: "above_1", "below_1")."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen)
    w = torch.randn(3, 2, generator=gen)
    return [("above_1", x, w), ("below_1", 0.1 * x, 0.1 * w)]


def _value_and_grad(fn: Callable, x: torch.Tensor, w: torch.Tensor):
    w = w.clone().requires_grad_(True)
    value = fn(x, w)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        return value, None
    if value.requires_grad:
        value.backward()
    return value.detach(), w.grad


def _words(where: str) -> str:
    return say(TEXT, f"feedback.{where}")


def check_one_graph(one_graph: Callable) -> CheckResult:
    """Check `one_graph(x, w)` against `normalised_loss` (see the module docstring)."""
    if one_graph is Ellipsis or (callable(one_graph) and only_a_placeholder(one_graph)):
        return feedback([say(TEXT, "feedback.unfilled")])
    if not callable(one_graph):
        return feedback([say(TEXT, "feedback.not_function", type=type(one_graph).__name__)])
    for where, x, w in cases():
        want_value, want_grad = _value_and_grad(normalised_loss, x, w)
        try:
            value, grad = _value_and_grad(one_graph, x, w)
        except Exception as err:  # the learner's code may fail in any way
            return feedback([say(TEXT, "feedback.raised", error=error_line(err))])
        if value is None or value is Ellipsis:
            return feedback([say(TEXT, "feedback.returns_nothing")])
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            return feedback([say(TEXT, "feedback.not_a_loss", type=type(value).__name__)])
        if not torch.allclose(value, want_value, atol=1e-6):
            return feedback([say(TEXT, "feedback.wrong_value", where=_words(where))])
        if grad is None:
            return feedback([say(TEXT, "feedback.no_gradient")])
        if not torch.allclose(grad, want_grad, atol=1e-6):
            if where == "above_1" and torch.allclose(grad, torch.zeros_like(grad), atol=1e-6):
                return feedback([say(TEXT, "feedback.divisor_has_gradient")])
            return feedback([say(TEXT, "feedback.wrong_gradient", where=_words(where))])
    x, w = cases()[0][1:]
    try:
        report = compile_report(one_graph, x, w.clone().requires_grad_(True))
    except Exception as err:
        return feedback([say(TEXT, "feedback.raised", error=error_line(err))])
    if report["graph breaks"] or report["graphs"] != 1:
        reason = report["reasons"][0] if report["reasons"] else "-"
        return feedback([say(TEXT, "feedback.graph_break", graphs=report["graphs"],
                             reason=reason)])  # fmt: skip
    return feedback([], success=say(TEXT, "feedback.success"))
