"""Exercise checkers for notebook 03 (detach and clone): a snapshot, a cut, an update without .data.

Each checker takes the learner's function, runs it on fresh tensors of its own, and returns
`feedback([...])`: what is wrong and how to fix it. A checker never raises, so a notebook with the
`...` placeholder still in place runs to the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from helpers.checks import CheckResult, call_learner, clean_message, feedback
from helpers.language import say
from helpers.shapes import shape_text

__all__ = ["check_cut", "check_sgd_update", "check_snapshot"]

#: The text file the learner-facing messages come from (its [feedback] table).
TEXT = "03_detach_and_clone"

_W = [1.0, 2.0, 3.0]  # the weights the checkers hand to the learner's functions
_LR = 0.25  # with the loss sum(w * w), w.grad = 2w and one step gives w = [0.5, 1.0, 1.5]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _error_text(name: str, err: BaseException) -> str:
    return say(
        TEXT,
        "feedback.raised",
        name=name,
        error=type(err).__name__,
        message=clean_message(str(err)),
    )


def _not_a_function(checker: str, function: str, value: object) -> str:
    return say(
        TEXT,
        "feedback.not_a_function",
        checker=checker,
        function=function,
        type=type(value).__name__,
    )


def _not_a_tensor(name: str, result: Any, source: str) -> str | None:
    """A message when a function returned the placeholder, nothing, or not a tensor; `source`
    is the tensor the answer should be built from."""
    if result is Ellipsis:
        return say(TEXT, "feedback.returns_placeholder", name=name, source=source)
    if result is None:
        return say(TEXT, "feedback.returned_none", name=name)
    if not isinstance(result, torch.Tensor):
        return say(TEXT, "feedback.returned_not_a_tensor", name=name, type=type(result).__name__)
    return None


def _warned(messages: list[str]) -> list[str]:
    return [say(TEXT, "feedback.pytorch_warned", message=message) for message in messages]


def _values(t: torch.Tensor) -> list[float]:
    return [round(v, 4) for v in t.detach().reshape(-1).tolist()]


def check_snapshot(take_snapshot: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Check `take_snapshot(w)`: a copy of w's values that outlives an in-place update of w."""
    name = "take_snapshot(w)"
    if not callable(take_snapshot):
        return feedback([_not_a_function("check_snapshot", "take_snapshot", take_snapshot)])
    w = torch.tensor(_W, requires_grad=True)
    before, warned, err = call_learner(take_snapshot, w)
    if err is not None:
        return feedback([_error_text(name, err)])
    problem = _not_a_tensor(name, before, "w")
    if problem:
        return feedback([problem])
    if before is w:
        return feedback([say(TEXT, "feedback.snapshot_is_w", name=name)])
    problems = []
    if before.shape != w.shape:
        problems.append(
            say(TEXT, "feedback.snapshot_shape", shape=shape_text(before), w_shape=shape_text(w))
        )
    elif _values(before) != _values(w):
        problems.append(
            say(TEXT, "feedback.snapshot_values", got=_values(before), expected=_values(w))
        )
    if before.grad_fn is not None:
        problems.append(
            say(TEXT, "feedback.snapshot_in_graph", grad_fn=type(before.grad_fn).__name__)
        )
    elif before.requires_grad:
        problems.append(say(TEXT, "feedback.snapshot_requires_grad"))
    if before.numel() and _same_storage(before, w):
        problems.append(say(TEXT, "feedback.snapshot_shares_memory"))
    problems += _warned(warned)
    # A snapshot with w's values, outside the graph and in memory of its own: an in-place
    # update of w (what an optimizer step does) cannot reach it.
    return feedback(problems, success=say(TEXT, "feedback.snapshot_success"))


def _joint_gradient() -> torch.Tensor:
    x = torch.tensor(_W, requires_grad=True)
    ((x * x) * torch.tensor([1.0, -2.0, 3.0])).sum().backward()
    return x.grad


def check_cut(cut: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Check `cut(f1)`: a new leaf with f1's values that receives a .grad, as in split learning."""
    name = "cut(f1)"
    if not callable(cut):
        return feedback([_not_a_function("check_cut", "cut", cut)])
    x = torch.tensor(_W, requires_grad=True)
    f1 = x * x  # model 1
    ff1, warned, err = call_learner(cut, f1)
    if err is not None:
        return feedback([_error_text(name, err)])
    problem = _not_a_tensor(name, ff1, "f1")
    if problem:
        return feedback([problem])
    if ff1 is f1:
        return feedback([say(TEXT, "feedback.cut_is_f1", name=name)])
    problems = []
    if ff1.shape != f1.shape or _values(ff1) != _values(f1):
        problems.append(say(TEXT, "feedback.cut_values", got=_values(ff1), expected=_values(f1)))
    if ff1.grad_fn is not None:
        problems.append(say(TEXT, "feedback.cut_in_graph", grad_fn=type(ff1.grad_fn).__name__))
    elif not ff1.requires_grad:
        problems.append(say(TEXT, "feedback.cut_no_grad"))
    if ff1.numel() and _same_storage(ff1, f1):
        problems.append(say(TEXT, "feedback.cut_shares_memory"))
    problems += _warned(warned)
    if problems:
        return feedback(problems)
    f2 = (ff1 * torch.tensor([1.0, -2.0, 3.0])).sum()  # model 2 and its loss
    f2.backward()
    if x.grad is not None:
        return feedback([say(TEXT, "feedback.cut_reached_x")])
    f1.backward(ff1.grad)  # model 1 continues from the gradient at the cut
    if x.grad is None or not torch.allclose(x.grad, _joint_gradient()):
        return feedback([say(TEXT, "feedback.cut_wrong_gradient")])
    return feedback([], success=say(TEXT, "feedback.cut_success"))


def check_sgd_update(sgd_update: Callable[[torch.Tensor, float], Any]) -> CheckResult:
    """Check `sgd_update(w, lr)`: w <- w - lr * w.grad in place, seen by autograd (no .data)."""
    name = "sgd_update(w, lr)"
    if not callable(sgd_update):
        return feedback([_not_a_function("check_sgd_update", "sgd_update", sgd_update)])
    w = torch.tensor(_W, requires_grad=True)
    (w * w).sum().backward()  # w.grad = 2w = [2, 4, 6]
    start = w.detach().clone()
    expected = start - _LR * w.grad
    wrong_way = start + _LR * w.grad
    version = w._version
    _, warned, err = call_learner(sgd_update, w, _LR)
    if err is not None:
        if "leaf Variable that requires grad" in str(err):
            return feedback([say(TEXT, "feedback.update_needs_no_grad")])
        return feedback([_error_text(name, err)])
    problems = []
    if not (w.is_leaf and w.requires_grad):
        problems.append(say(TEXT, "feedback.update_not_a_leaf"))
    if torch.equal(w.detach(), start):
        problems.append(say(TEXT, "feedback.update_unchanged"))
    elif torch.allclose(w.detach(), wrong_way):
        problems.append(say(TEXT, "feedback.update_uphill"))
    elif not torch.allclose(w.detach(), expected):
        problems.append(
            say(TEXT, "feedback.update_values", got=_values(w), expected=_values(expected))
        )
    elif w._version == version:
        problems.append(say(TEXT, "feedback.update_unseen"))
    problems += _warned(warned)
    return feedback(problems, success=say(TEXT, "feedback.update_success"))
