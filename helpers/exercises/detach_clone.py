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

__all__ = ["check_cut", "check_sgd_update", "check_snapshot"]

_W = [1.0, 2.0, 3.0]  # the weights the checkers hand to the learner's functions
_LR = 0.25  # with the loss sum(w * w), w.grad = 2w and one step gives w = [0.5, 1.0, 1.5]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _error_text(name: str, err: BaseException) -> str:
    return f"{name} raised {type(err).__name__}: {clean_message(str(err))}"


def _not_a_tensor(name: str, result: Any, what: str) -> str | None:
    """A message when a function returned the placeholder, nothing, or not a tensor."""
    if result is Ellipsis:
        return f"{name} still returns `...`: replace the `...` with {what}."
    if result is None:
        return f"{name} returned None: did you forget `return`?"
    if not isinstance(result, torch.Tensor):
        return f"{name} returned a {type(result).__name__}, not a tensor."
    return None


def _values(t: torch.Tensor) -> list[float]:
    return [round(v, 4) for v in t.detach().reshape(-1).tolist()]


def check_snapshot(take_snapshot: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Check `take_snapshot(w)`: a copy of w's values that outlives an in-place update of w."""
    name = "take_snapshot(w)"
    if not callable(take_snapshot):
        return feedback(
            [
                f"pass the function itself: check_snapshot(take_snapshot), not a "
                f"{type(take_snapshot).__name__}."
            ]
        )
    w = torch.tensor(_W, requires_grad=True)
    before, warned, err = call_learner(take_snapshot, w)
    if err is not None:
        return feedback([_error_text(name, err)])
    problem = _not_a_tensor(name, before, "an expression built from w")
    if problem:
        return feedback([problem])
    if before is w:
        return feedback([f"{name} returned w itself: a snapshot must be a new tensor."])
    problems = []
    if before.shape != w.shape:
        problems.append(f"the snapshot has shape {list(before.shape)}, w has {list(w.shape)}.")
    elif _values(before) != _values(w):
        problems.append(f"the snapshot holds {_values(before)}, but w holds {_values(w)}.")
    if before.grad_fn is not None:
        problems.append(
            f"the snapshot is still in the graph (grad_fn {type(before.grad_fn).__name__}): "
            "add .detach() so it does not require grad."
        )
    elif before.requires_grad:
        problems.append("the snapshot requires grad: a record of values should not; use .detach().")
    if before.numel() and _same_storage(before, w):
        problems.append(
            "the snapshot shares memory with w (detach() and .data copy nothing): the next "
            "in-place update of w would change it too. Add .clone()."
        )
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    # A snapshot with w's values, outside the graph and in memory of its own: an in-place
    # update of w (what an optimizer step does) cannot reach it.
    return feedback(
        problems,
        success="Correct: a copy (own memory), outside the graph, unchanged by updates of w.",
    )


def _joint_gradient() -> torch.Tensor:
    x = torch.tensor(_W, requires_grad=True)
    ((x * x) * torch.tensor([1.0, -2.0, 3.0])).sum().backward()
    return x.grad


def check_cut(cut: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Check `cut(f1)`: a new leaf with f1's values that receives a .grad, as in split learning."""
    name = "cut(f1)"
    if not callable(cut):
        return feedback([f"pass the function itself: check_cut(cut), not a {type(cut).__name__}."])
    x = torch.tensor(_W, requires_grad=True)
    f1 = x * x  # model 1
    ff1, warned, err = call_learner(cut, f1)
    if err is not None:
        return feedback([_error_text(name, err)])
    problem = _not_a_tensor(name, ff1, "an expression built from f1")
    if problem:
        return feedback([problem])
    if ff1 is f1:
        return feedback([f"{name} returned f1 itself: nothing was cut."])
    problems = []
    if ff1.shape != f1.shape or _values(ff1) != _values(f1):
        problems.append(f"ff1 holds {_values(ff1)}, but f1 holds {_values(f1)}.")
    if ff1.grad_fn is not None:
        problems.append(
            f"ff1 is still connected to f1's graph (grad_fn {type(ff1.grad_fn).__name__}): "
            "add .detach(), or backward from model 2 runs straight into model 1."
        )
    elif not ff1.requires_grad:
        problems.append(
            "ff1.requires_grad is False, so ff1.grad will stay None: did you call "
            "requires_grad_() on the cut?"
        )
    if ff1.numel() and _same_storage(ff1, f1):
        problems.append(
            "ff1 shares memory with f1 (detach() copies nothing): in one process, an in-place "
            "edit on one side would change the other. Add .clone(), so the hand-off is a copy "
            "(over a wire the receiver gets a copy anyway)."
        )
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    if problems:
        return feedback(problems)
    f2 = (ff1 * torch.tensor([1.0, -2.0, 3.0])).sum()  # model 2 and its loss
    f2.backward()
    if x.grad is not None:
        return feedback(["backward from model 2 reached x: ff1 is not a real cut."])
    f1.backward(ff1.grad)  # model 1 continues from the gradient at the cut
    if x.grad is None or not torch.allclose(x.grad, _joint_gradient()):
        return feedback(["the two-stage backward does not give the joint gradient for x."])
    return feedback(
        [],
        success="Correct: ff1 is a new leaf with its own copy of f1's values; the two-stage "
        "backward gives exactly the joint gradient.",
    )


def check_sgd_update(sgd_update: Callable[[torch.Tensor, float], Any]) -> CheckResult:
    """Check `sgd_update(w, lr)`: w <- w - lr * w.grad in place, seen by autograd (no .data)."""
    name = "sgd_update(w, lr)"
    if not callable(sgd_update):
        return feedback(
            [
                f"pass the function itself: check_sgd_update(sgd_update), not a "
                f"{type(sgd_update).__name__}."
            ]
        )
    w = torch.tensor(_W, requires_grad=True)
    (w * w).sum().backward()  # w.grad = 2w = [2, 4, 6]
    start = w.detach().clone()
    expected = start - _LR * w.grad
    wrong_way = start + _LR * w.grad
    version = w._version
    _, warned, err = call_learner(sgd_update, w, _LR)
    if err is not None:
        if "leaf Variable that requires grad" in str(err):
            return feedback(
                [
                    "an in-place update of a leaf that requires grad raises unless it runs "
                    "inside `with torch.no_grad():`.",
                ]
            )
        return feedback([_error_text(name, err)])
    problems = []
    if not (w.is_leaf and w.requires_grad):
        problems.append("w is no longer a leaf that requires grad: update its values only.")
    if torch.equal(w.detach(), start):
        problems.append(
            "w did not change: update it in place (`w -= ...` or `w.sub_(...)` inside "
            "`with torch.no_grad():`). `w = w - ...` only rebinds the local name."
        )
    elif torch.allclose(w.detach(), wrong_way):
        problems.append("w moved up the gradient: subtract lr * w.grad, don't add it.")
    elif not torch.allclose(w.detach(), expected):
        problems.append(f"w holds {_values(w)}, expected {_values(expected)} (w - lr * w.grad).")
    elif w._version == version:
        problems.append(
            "w's version counter did not move, so autograd cannot see the update: that is "
            "what .data does. Use `with torch.no_grad(): w -= lr * w.grad` instead."
        )
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    return feedback(
        problems,
        success="Correct: w changed in place, is still a leaf, and its version counter moved "
        "(autograd can see the update).",
    )
