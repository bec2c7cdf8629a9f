"""Checker for notebook 09c's exercise: the same loss and the same gradients, in one graph.

The notebook's `normalised_loss(x, w)` divides the loss by its own value when it is above 1,
reading that value with `.item()`: Python decides, so torch.compile breaks the graph there.
`check_one_graph(one_graph)` wants the learner's version: the same value and the same gradient
for `w` as the original, on an input whose loss is above 1 and one whose loss is below, and no
graph break (torch's own count, `torch._dynamo.explain`). The divisor the original builds with
`.item()` is a constant for autograd, so a tensor divisor must be detached: the checker says so
when the gradient is 0 above 1 and the function's graph divides by a tensor with a gradient, and
that it returns a constant there when its graph has no such division (`torch.where` returning 1,
a clamp of the loss at 1). A wrong value is named by what it is on both sides of 1: undivided,
divided on the wrong side, divided on both, multiplied. It never raises.
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


def _raw_loss(x: torch.Tensor, w: torch.Tensor) -> float:
    """normalised_loss's loss before any division."""
    return float(torch.tanh(x @ w).pow(2).sum())


def _divides_by_a_gradient(value: torch.Tensor) -> bool:
    """Whether the graph of `value` divides by a tensor that has a gradient: a DivBackward0 node
    with an edge for its divisor, or a ReciprocalBackward0 (1 / t)."""
    seen, stack = set(), [value.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        name = type(node).__name__
        if name == "ReciprocalBackward0" or (
            name == "DivBackward0" and node.next_functions[1][0] is not None
        ):
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


def _value_and_grad(fn: Callable, x: torch.Tensor, w: torch.Tensor):
    """The value of fn(x, w), the gradient for w, and whether fn divides by a tensor with a
    gradient."""
    w = w.clone().requires_grad_(True)
    value = fn(x, w)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        return value, None, False
    divides = value.grad_fn is not None and _divides_by_a_gradient(value)
    if value.requires_grad:
        value.backward()
    return value.detach(), w.grad, divides


def _words(where: str) -> str:
    return say(TEXT, f"feedback.{where}")


def _near(value: torch.Tensor, number: float) -> bool:
    return abs(float(value) - number) <= 1e-5 * max(1.0, abs(number))


def _value_problem(values: dict[str, torch.Tensor], raw: dict[str, float]) -> str:
    """What a wrong loss did on each side of 1 (raw: the loss before any division)."""
    above, below = values["above_1"], values["below_1"]
    above_right = _near(above, 1.0)
    below_right = _near(below, raw["below_1"])
    if _near(above, raw["above_1"]) and _near(below, 1.0):
        return say(TEXT, "feedback.reversed")
    if _near(above, raw["above_1"]) and below_right:
        return say(TEXT, "feedback.not_divided")
    if above_right and _near(below, 1.0):
        return say(TEXT, "feedback.divides_below_1")
    if _near(above, raw["above_1"] ** 2):
        return say(TEXT, "feedback.multiplied")
    where = "below_1" if above_right else "above_1"
    return say(TEXT, "feedback.wrong_value", where=_words(where))


def check_one_graph(one_graph: Callable) -> CheckResult:
    """Check `one_graph(x, w)` against `normalised_loss` (see the module docstring)."""
    if one_graph is Ellipsis or (callable(one_graph) and only_a_placeholder(one_graph)):
        return feedback([say(TEXT, "feedback.unfilled")])
    if not callable(one_graph):
        return feedback([say(TEXT, "feedback.not_function", type=type(one_graph).__name__)])
    got, want, raw = {}, {}, {}
    for where, x, w in cases():
        want[where] = _value_and_grad(normalised_loss, x, w)
        raw[where] = _raw_loss(x, w)
        try:
            got[where] = value, _, _ = _value_and_grad(one_graph, x, w)
        except Exception as err:  # the learner's code may fail in any way
            return feedback([say(TEXT, "feedback.raised", error=error_line(err))])
        if value is None or value is Ellipsis:
            return feedback([say(TEXT, "feedback.returns_nothing")])
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            return feedback([say(TEXT, "feedback.not_a_loss", type=type(value).__name__)])
    if not all(torch.allclose(got[k][0], want[k][0], atol=1e-6) for k in got):
        return feedback([_value_problem({k: v[0] for k, v in got.items()}, raw)])
    for where, (_, grad, divides) in got.items():
        want_grad = want[where][1]
        if grad is None:
            return feedback([say(TEXT, "feedback.no_gradient")])
        if not torch.allclose(grad, want_grad, atol=1e-6):
            if where == "above_1" and torch.allclose(grad, torch.zeros_like(grad), atol=1e-6):
                key = "divisor_has_gradient" if divides else "constant_above_1"
                return feedback([say(TEXT, f"feedback.{key}")])
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
