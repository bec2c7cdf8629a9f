"""Exercise checkers for notebook 08 (grad modes, and why nothing learns): a real leaf, a training
loop that learns, a frozen middle layer.

Each checker takes the learner's function, runs it on fresh tensors or a fresh model of its own,
and returns `feedback([...])`: what is wrong and how to fix it. A checker never raises, so a
notebook with the `...` placeholder still in place runs to the end.

The model the checkers hand out is the notebook's: three `Linear` layers called `first`, `middle`
and `last`, applied in that order, with hand-set weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers.checks import CheckResult, call_learner, clean_message, feedback
from helpers.doctor import Checkup, doctor
from helpers.language import say
from helpers.params import ParamDiff, param_diff, snapshot
from helpers.shapes import shape_text

__all__ = ["check_freeze_middle", "check_real_leaf", "check_train"]

_VALUES = [1.0, -2.0, 4.0]  # what check_real_leaf passes to make_weight(values)
_SCALE = 0.01
_LR = 0.0625  # the step the checkers take; with these weights the loss falls step after step
_NO_GRAPH = "does not require grad and does not have a grad_fn"  # torch's error for a cut loss
TEXT = "08_grad_modes_and_why_nothing_learns"


class _ThreeLayers(nn.Module):
    """first -> middle -> last: the notebook's model, with the same hand-set weights."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.middle, self.last = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 1)
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([[1.0, 0.5], [-0.5, 1.0]]))
            self.middle.weight.copy_(torch.tensor([[0.5, -1.0], [1.0, 0.5]]))
            self.last.weight.copy_(torch.tensor([[1.0, 0.5]]))
            for layer in (self.first, self.middle, self.last):
                layer.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.middle(self.first(x)))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[1.0, 2.0], [2.0, -1.0]]), torch.tensor([[1.0], [2.5]])


def _say(key: str, **values: Any) -> str:
    return say(TEXT, f"feedback.{key}", **values)


def _error_text(call: str, err: BaseException, key: str = "raised") -> str:
    """Message `key` (`raised`, `step_failed`) about the learner's error; for a loss with no
    graph behind it, followed by where to look for the cut."""
    message = clean_message(str(err))
    if _NO_GRAPH not in str(err):
        return _say(key, call=call, error=type(err).__name__, message=message)
    failure = _say(key, call=call, error=type(err).__name__, message=message.rstrip("."))
    return _say("no_graph", failure=failure)


def _not_callable(func: object, checker: str, name: str) -> CheckResult | None:
    if callable(func):
        return None
    return feedback([_say("not_callable", checker=checker, name=name, type=type(func).__name__)])


def _values(t: torch.Tensor) -> list[float]:
    return [round(v, 6) for v in t.detach().reshape(-1).tolist()]


def _names(names: list[str]) -> str:
    return ", ".join(names)


# -- exercise 1: a real leaf ----------------------------------------------------------------------


def check_real_leaf(make_weight: Callable[[list[float]], Any]) -> CheckResult:
    """Check `make_weight(values)`: a float64 leaf that requires grad, holding values * 0.01."""
    name = "make_weight(values)"
    refused = _not_callable(make_weight, "check_real_leaf", "make_weight")
    if refused is not None:
        return refused
    w, warned, err = call_learner(make_weight, list(_VALUES), first_line=True)
    if err is not None:
        return feedback([_error_text(name, err)])
    if w is Ellipsis:
        return feedback([_say("weight_unfilled", call=name)])
    if w is None:
        return feedback([_say("returned_none", call=name)])
    if not isinstance(w, torch.Tensor):
        return feedback([_say("not_a_tensor", call=name, type=type(w).__name__)])
    expected = [round(v * _SCALE, 6) for v in _VALUES]
    problems = []
    if w.grad_fn is not None:
        problems.append(_say("weight_not_leaf", grad_fn=w.grad_fn.name()))
    elif not w.requires_grad:
        problems.append(_say("weight_no_requires_grad"))
    if w.dtype != torch.float64:
        problems.append(_say("weight_dtype", dtype=w.dtype))
    if list(w.shape) != [len(_VALUES)]:
        problems.append(
            _say("weight_shape", shape=shape_text(w), expected=shape_text([len(_VALUES)]))
        )
    elif _values(w) != expected:
        problems.append(_say("weight_values", values=_values(w), expected=expected, scale=_SCALE))
    for message in warned:
        problems.append(_say("warned", message=message))
    if problems:
        return feedback(problems)
    optimizer = torch.optim.SGD([w], lr=1.0)
    before = w.detach().clone()
    (w * w).sum().backward()
    optimizer.step()
    if torch.equal(before, w.detach()):
        return feedback([_say("weight_did_not_move")])
    return feedback([], success=_say("success_real_leaf"))


# -- exercise 2: a training loop that learns ------------------------------------------------------

#: torch's warning for float() of a tensor that requires grad (torch >= 2.12). torch gives it
#: once per process, so heeding it would make the verdict depend on what ran before in the
#: kernel; and `losses.append(float(loss))` is a right answer.
_SCALAR_WARNING = "Converting a tensor with requires_grad=True to a scalar"


def _why_not_moved(diff: ParamDiff, model: nn.Module, checkup: Checkup) -> list[str]:
    """Messages for the parameters that did not move: no gradient, a gradient cleared before the
    step (the doctor's verdict: it watched the steps), or a gradient not applied."""
    params = dict(model.named_parameters())
    cleared = [n for n in diff.unchanged if checkup.cause(n) == "cleared_before_step"]
    no_grad = [n for n in diff.unchanged if params[n].grad is None and n not in cleared]
    not_applied = [n for n in diff.unchanged if params[n].grad is not None and n not in cleared]
    problems = []
    if cleared:
        problems.append(_say("gradient_cleared", names=_names(cleared)))
    if no_grad and len(no_grad) == len(params):
        problems.append(_say("no_gradient_anywhere"))
    elif no_grad:
        problems.append(_say("no_gradient_reached", names=_names(no_grad)))
    if not_applied:
        problems.append(_say("gradient_not_applied", names=_names(not_applied)))
    return problems


def check_train(train: Callable[..., Any]) -> CheckResult:
    """Check `train(model, x, target)`: SGD steps that move every parameter; returns the losses."""
    name = "train(model, x, target)"
    refused = _not_callable(train, "check_train", "train")
    if refused is not None:
        return refused
    model = _ThreeLayers()
    x, target = _data()
    before = snapshot(model)
    with doctor(model) as checkup:  # watches the steps: which gradient was stale or cleared
        losses, warned, err = call_learner(train, model, x, target, first_line=True)
    if err is not None:
        return feedback([_error_text(name, err)])
    if losses is Ellipsis:
        return feedback([_say("losses_unfilled", call=name)])
    ok_list = isinstance(losses, list | tuple) and all(isinstance(v, float) for v in losses)
    if not ok_list:
        return feedback([_say("losses_not_a_list", call=name, type=type(losses).__name__)])
    diff = param_diff(before, model)
    problems = _why_not_moved(diff, model, checkup)
    stale = [n for n in diff.changed if checkup.cause(n) == "leftover"]
    if stale:
        problems.append(_say("gradient_stale", names=_names(stale)))
    if len(losses) < 2:
        problems.append(_say("too_few_losses", call=name, count=len(losses)))
    elif not losses[-1] < losses[0] and not stale:
        problems.append(
            _say("loss_did_not_fall", first=f"{losses[0]:.4g}", last=f"{losses[-1]:.4g}")
        )
    for message in warned:
        if not message.startswith(_SCALAR_WARNING):  # float(loss) is a right answer
            problems.append(_say("warned", message=message))
    if problems:  # the success text is shown only without problems
        return feedback(problems)
    return feedback(
        [], success=_say("success_train", first=f"{losses[0]:.4g}", last=f"{losses[-1]:.4g}")
    )


# -- exercise 3: freeze the middle layer ----------------------------------------------------------


def check_freeze_middle(freeze_middle: Callable[[nn.Module], Any]) -> CheckResult:
    """Check `freeze_middle(model)`: middle stops learning, first and last still learn."""
    name = "freeze_middle(model)"
    refused = _not_callable(freeze_middle, "check_freeze_middle", "freeze_middle")
    if refused is not None:
        return refused
    model = _ThreeLayers()
    _, warned, err = call_learner(freeze_middle, model, first_line=True)
    if err is not None:
        return feedback([_error_text(name, err)])
    if not any(p.requires_grad for p in model.parameters()):
        return feedback([_say("all_frozen")])
    x, target = _data()
    before = snapshot(model)
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
        nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
    except Exception as err:  # e.g. everything frozen: the loss has no graph
        return feedback([_error_text(name, err, key="step_failed")])
    diff = param_diff(before, model)
    moved_middle = [n for n in diff.changed if n.startswith("middle.")]
    frozen_other = [n for n in diff.unchanged if not n.startswith("middle.")]
    problems = []
    if moved_middle and not model.middle.training:
        problems.append(_say("middle_moved_in_eval", names=_names(moved_middle)))
    elif moved_middle:
        problems.append(_say("middle_moved", names=_names(moved_middle)))
    if frozen_other:
        problems.append(_say("others_frozen", names=_names(frozen_other)))
    for message in warned:
        problems.append(_say("warned", message=message))
    return feedback(problems, success=_say("success_freeze_middle"))
