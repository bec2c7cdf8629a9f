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
from helpers.language import say
from helpers.shapes import shape_text

__all__ = [
    "EXERCISE_W",
    "EXERCISE_X",
    "check_autograd_grad",
    "check_clip_hook",
    "check_retain_grad",
]

#: The text file the learner-facing messages come from (its [feedback] table).
TEXT = "04_retain_grad_and_hooks"

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
        if value.numel() <= 6:
            return _values(value)
        return say(TEXT, "feedback.a_tensor_of_shape", shape=shape_text(value))
    return say(TEXT, "feedback.a_value_of_type", type=type(value).__name__)


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
        return say(TEXT, "feedback.still_placeholder", name=name)
    if not isinstance(value, torch.Tensor):
        return say(TEXT, "feedback.not_a_tensor", name=name, type=type(value).__name__)
    if tuple(value.shape) != shape:
        return say(
            TEXT,
            "feedback.wrong_shape",
            name=name,
            shape=shape_text(value),
            expected=shape_text(shape),
        )
    return None


def _safely(check: Callable[[], CheckResult]) -> CheckResult:
    """Run a checker; an unexpected failure becomes feedback instead of a traceback."""
    try:
        return check()
    except Exception as err:  # a checker must never stop Run All
        return feedback(
            [say(TEXT, "feedback.could_not_check", error=type(err).__name__, message=err)]
        )


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
            return feedback([say(TEXT, "feedback.hidden_is_leaf")])
        if not hidden.retains_grad:
            if _grad(W) is None:
                return feedback([say(TEXT, "feedback.not_retained_no_backward")])
            return feedback([say(TEXT, "feedback.not_retained")])
        got = _grad(hidden)
        if got is None:
            if _grad(W) is None:
                return feedback([say(TEXT, "feedback.no_backward")])
            return feedback([say(TEXT, "feedback.retained_too_late")])
        if _same(got, 2 * want):
            return feedback([say(TEXT, "feedback.hidden_grad_twice", got=_values(got))])
        if not _same(got, want):
            return feedback(
                [say(TEXT, "feedback.hidden_grad_wrong", got=_values(got), expected=_values(want))]
            )
        return feedback([], success=say(TEXT, "feedback.retain_grad_success", got=_values(got)))

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
            problems.append(say(TEXT, "feedback.seen_not_a_list", type=type(seen).__name__))
        elif not seen:
            problems.append(say(TEXT, "feedback.seen_empty"))
        elif len(seen) > 1:
            problems.append(say(TEXT, "feedback.hook_ran_more", times=len(seen)))
        elif _same(seen[0], clipped) and not _same(seen[0], incoming):
            # an in-place clamp_ bumped the recorded tensor's version; a recorded clamp() result
            # is a new tensor, version 0: the hook appended the clipped copy, not the gradient
            edited = isinstance(seen[0], torch.Tensor) and seen[0]._version > 0
            key = "feedback.seen_clipped" if edited else "feedback.seen_clipped_copy"
            problems.append(say(TEXT, key, got=_values(seen[0])))
        elif not _same(seen[0], incoming):
            problems.append(
                say(
                    TEXT,
                    "feedback.seen_wrong",
                    expected=_values(incoming),
                    got=_shown(seen[0]),
                )
            )
        w_grad = _grad(W)
        if w_grad is None:
            problems.append(say(TEXT, "feedback.w_grad_none"))
        elif _same(w_grad, torch.outer(clipped, x.detach())):
            pass  # right (also when nothing needed clipping, and clipped equals incoming)
        elif _same(w_grad, torch.outer(incoming, x.detach())):
            problems.append(say(TEXT, "feedback.w_grad_unclipped"))
        else:
            problems.append(
                say(
                    TEXT,
                    "feedback.w_grad_wrong",
                    got=_values(w_grad),
                    expected=_values(torch.outer(clipped, x.detach())),
                )
            )
        return feedback(
            problems,
            success=say(
                TEXT, "feedback.clip_hook_success", seen=_values(incoming), passed=_values(clipped)
            ),
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
            return feedback([say(TEXT, "feedback.grads_unfilled")])
        if not isinstance(grads, (tuple, list)):
            return feedback([say(TEXT, "feedback.grads_not_a_pair", type=type(grads).__name__)])
        if len(grads) != 2:
            return feedback(
                [
                    say(
                        TEXT,
                        "feedback.grads_wrong_length",
                        type=type(grads).__name__,
                        count=len(grads),
                    )
                ]
            )
        _, want_hidden = _expected(W, x)
        want_w = torch.outer(want_hidden, x.detach())
        g_hidden, g_w = grads
        problems = []
        if _same(g_hidden, want_w) and _same(g_w, want_hidden):
            problems.append(say(TEXT, "feedback.grads_swapped"))
        else:
            if not _same(g_hidden, want_hidden):
                problems.append(
                    say(TEXT, "feedback.grads_hidden_wrong", expected=_values(want_hidden))
                )
            if not _same(g_w, want_w):
                problems.append(say(TEXT, "feedback.grads_w_wrong", expected=_values(want_w)))
        if _grad(W) is not None:
            problems.append(say(TEXT, "feedback.grads_filled_w_grad"))
        if hidden.retains_grad:
            problems.append(say(TEXT, "feedback.grads_retained"))
        return feedback(problems, success=say(TEXT, "feedback.autograd_grad_success"))

    return _safely(check)
