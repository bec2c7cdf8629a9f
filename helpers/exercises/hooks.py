"""Checkers for notebook 04 (retain_grad, tensor hooks, torch.autograd.grad).

Every exercise uses the same tiny graph: `hidden = W @ x`, `loss = (hidden ** 2).sum()`, so
d loss / d hidden is `2 * hidden` and d loss / d W is the outer product of that with `x`.
Each checker returns a `CheckResult` and never raises, whatever the learner passes in.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from helpers.checks import CheckResult, feedback

__all__ = [
    "EXERCISE_W",
    "EXERCISE_X",
    "check_autograd_grad",
    "check_clip_hook",
    "check_retain_grad",
]

#: The exercises' weight and input: small, exactly representable numbers.
EXERCISE_W = [[1.0, -1.0], [2.0, 0.5]]
EXERCISE_X = [1.0, 2.0]


def _values(t: torch.Tensor) -> str:
    """A tensor's values as a short list, 4 significant digits."""
    flat = t.detach().reshape(-1).tolist()
    return "[" + ", ".join(format(v, ".4g") for v in flat) + "]"


def _shown(value: object) -> str:
    """A short description of whatever the learner stored."""
    if isinstance(value, torch.Tensor):
        return _values(value) if value.numel() <= 6 else f"a tensor of shape {list(value.shape)}"
    return f"a value of type {type(value).__name__}"


def _grad(t: torch.Tensor) -> torch.Tensor | None:
    """`t.grad` without the non-leaf UserWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return t.grad


def _same(a: object, b: torch.Tensor) -> bool:
    """True when `a` is a tensor equal to `b` (shape and values, float tolerance)."""
    if not isinstance(a, torch.Tensor) or a.shape != b.shape:
        return False
    return torch.allclose(a.detach().to(b.dtype), b, rtol=1e-5, atol=1e-6)


def _tensor_problem(name: str, value: object, shape: tuple[int, ...]) -> str | None:
    """A problem message when `value` is not a tensor of `shape`, else None."""
    if value is ...:
        return f"{name} is still `...`: replace the placeholder with your code."
    if not isinstance(value, torch.Tensor):
        return f"{name} should be a tensor, but it is a {type(value).__name__}."
    if tuple(value.shape) != shape:
        return f"{name} has shape {list(value.shape)}, expected {list(shape)}."
    return None


def _safely(check: Callable[[], CheckResult]) -> CheckResult:
    """Run a checker; an unexpected failure becomes feedback instead of a traceback."""
    try:
        return check()
    except Exception as err:  # a checker must never stop Run All
        return feedback([f"Could not check your answer ({type(err).__name__}: {err})."])


def _expected(W: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden = W @ x and d loss / d hidden = 2 * hidden, recomputed without a graph."""
    hidden = W.detach() @ x.detach()
    return hidden, 2 * hidden


def check_retain_grad(hidden: Any, W: Any, x: Any) -> CheckResult:
    """Exercise 1: after `loss.backward()`, `hidden.grad` holds d loss / d hidden."""

    def check() -> CheckResult:
        for name, value, shape in (("W", W, (2, 2)), ("x", x, (2,)), ("hidden", hidden, (2,))):
            problem = _tensor_problem(name, value, shape)
            if problem:
                return feedback([problem])
        _, want = _expected(W, x)
        if hidden.is_leaf:
            return feedback(
                [
                    "hidden is a leaf, so it is no longer the output of W @ x in the graph "
                    "(was it detached or re-created?). Keep hidden = W @ x and call "
                    "hidden.retain_grad() on it."
                ]
            )
        if not hidden.retains_grad:
            if _grad(W) is None:
                return feedback(
                    [
                        "hidden.retains_grad is False and W.grad is None: call "
                        "hidden.retain_grad(), then let loss.backward() run."
                    ]
                )
            return feedback(
                [
                    "hidden.retains_grad is False: call hidden.retain_grad() before "
                    "loss.backward() (the method is retain_grad, not rtain_grad)."
                ]
            )
        got = _grad(hidden)
        if got is None:
            if _grad(W) is None:
                return feedback(["hidden.grad is None and so is W.grad: did loss.backward() run?"])
            return feedback(
                [
                    "hidden.retains_grad is True but hidden.grad is None: retain_grad() only "
                    "affects backward passes that run after it, so call it before "
                    "loss.backward()."
                ]
            )
        if _same(got, 2 * want):
            return feedback(
                [
                    f"hidden.grad is {_values(got)}, twice d loss/d hidden: backward ran twice, "
                    "and a retained grad adds up over backward passes like a leaf's .grad."
                ]
            )
        if not _same(got, want):
            return feedback(
                [
                    f"hidden.grad is {_values(got)}, expected d loss/d hidden = 2 * hidden = "
                    f"{_values(want)}."
                ]
            )
        return feedback([], success=f"hidden.grad = {_values(got)} = 2 * hidden.")

    return _safely(check)


def check_clip_hook(hidden: Any, W: Any, x: Any, seen: Any) -> CheckResult:
    """Exercise 2: a hook on `hidden` records the incoming gradient and clips it to [-1, 1]."""

    def check() -> CheckResult:
        for name, value, shape in (("W", W, (2, 2)), ("x", x, (2,)), ("hidden", hidden, (2,))):
            problem = _tensor_problem(name, value, shape)
            if problem:
                return feedback([problem])
        _, incoming = _expected(W, x)
        clipped = incoming.clamp(-1, 1)
        problems = []
        if not isinstance(seen, list):
            problems.append(f"seen should be a list, but it is a {type(seen).__name__}.")
        elif not seen:
            problems.append(
                "seen is empty: the hook should record the gradient it receives, "
                "e.g. seen.append(grad)."
            )
        elif len(seen) > 1:
            problems.append(
                f"the hook ran {len(seen)} times: each backward pass calls it once; "
                "run backward only once."
            )
        elif _same(seen[0], clipped) and not _same(seen[0], incoming):
            problems.append(
                f"seen[0] is {_values(seen[0])}, already clipped: the hook changed grad in "
                "place. Leave its argument alone and return a new tensor: grad.clamp(-1, 1)."
            )
        elif not _same(seen[0], incoming):
            problems.append(
                f"seen[0] should be the gradient flowing into hidden, 2 * hidden = "
                f"{_values(incoming)}; got {_shown(seen[0])}."
            )
        w_grad = _grad(W)
        if w_grad is None:
            problems.append("W.grad is None: did loss.backward() run?")
        elif _same(w_grad, torch.outer(incoming, x.detach())):
            problems.append(
                "W.grad was computed from the unclipped gradient: the hook must return the "
                "clipped tensor (return grad.clamp(-1, 1)); returning None keeps the gradient."
            )
        elif not _same(w_grad, torch.outer(clipped, x.detach())):
            problems.append(
                f"W.grad is {_values(w_grad)}, expected outer(clipped gradient, x) = "
                f"{_values(torch.outer(clipped, x.detach()))}."
            )
        return feedback(
            problems,
            success=f"The hook saw {_values(incoming)} and passed on {_values(clipped)}.",
        )

    return _safely(check)


def check_autograd_grad(grads: Any, hidden: Any, W: Any, x: Any) -> CheckResult:
    """Exercise 3: `grads = torch.autograd.grad(loss, [hidden, W])`, with `.grad` untouched."""

    def check() -> CheckResult:
        for name, value, shape in (("W", W, (2, 2)), ("x", x, (2,)), ("hidden", hidden, (2,))):
            problem = _tensor_problem(name, value, shape)
            if problem:
                return feedback([problem])
        if grads is ...:
            return feedback(
                ["grads is still `...`: replace it with torch.autograd.grad(loss, [hidden, W])."]
            )
        if not isinstance(grads, (tuple, list)) or len(grads) != 2:
            kind = type(grads).__name__
            size = f" of {len(grads)}" if isinstance(grads, (tuple, list)) else ""
            return feedback(
                [
                    f"grads is a {kind}{size}; torch.autograd.grad(loss, [hidden, W]) returns a "
                    "tuple of two gradients, one per input."
                ]
            )
        _, want_hidden = _expected(W, x)
        want_w = torch.outer(want_hidden, x.detach())
        g_hidden, g_w = grads
        problems = []
        if _same(g_hidden, want_w) and _same(g_w, want_hidden):
            problems.append(
                "the two gradients are swapped: they come back in the order of the inputs, "
                "so ask for [hidden, W]."
            )
        else:
            if not _same(g_hidden, want_hidden):
                problems.append(
                    f"grads[0] should be d loss/d hidden = 2 * hidden = {_values(want_hidden)}."
                )
            if not _same(g_w, want_w):
                problems.append(f"grads[1] should be d loss/d W = {_values(want_w)}.")
        if _grad(W) is not None:
            problems.append(
                "W.grad is filled: something called backward(). torch.autograd.grad returns the "
                "gradients and leaves every .grad alone, so no backward() is needed."
            )
        if hidden.retains_grad:
            problems.append(
                "hidden.retains_grad is True: torch.autograd.grad needs no retain_grad(); "
                "remove that call."
            )
        return feedback(problems, success="Both gradients, and W.grad is still None.")

    return _safely(check)
