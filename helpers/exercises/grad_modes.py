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
from helpers.params import ParamDiff, param_diff, snapshot

__all__ = ["check_freeze_middle", "check_real_leaf", "check_train"]

_VALUES = [1.0, -2.0, 4.0]  # what check_real_leaf passes to make_weight(values)
_SCALE = 0.01
_LR = 0.0625  # the step the checkers take; with these weights the loss falls step after step
_CUT_CALLS = "detach(), .data, torch.tensor(...), .item(), or a torch.no_grad() block"


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


def _error_text(name: str, err: BaseException) -> str:
    text = f"{name} raised {type(err).__name__}: {clean_message(str(err))}"
    if "does not require grad and does not have a grad_fn" in str(err):
        text = text.rstrip(".") + (
            ". The loss has no graph behind it: find what cut it (" + _CUT_CALLS + "); setting "
            "loss.requires_grad = True hides the error but trains nothing."
        )
    return text


def _not_callable(func: object, checker: str, name: str) -> CheckResult | None:
    if callable(func):
        return None
    return feedback(
        [f"pass the function itself: {checker}({name}), not a {type(func).__name__}."]
    )


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
        return feedback([f"{name} still returns `...`: replace the `...` with your tensor."])
    if w is None:
        return feedback([f"{name} returned None: did you forget `return`?"])
    if not isinstance(w, torch.Tensor):
        return feedback([f"{name} returned a {type(w).__name__}, not a tensor."])
    expected = [round(v * _SCALE, 6) for v in _VALUES]
    problems = []
    if w.grad_fn is not None:
        problems.append(
            f"w is not a leaf: it is the result of an operation (grad_fn {w.grad_fn.name()}), "
            "so backward fills the .grad of the tensor before that step, not w's, and an "
            "optimizer refuses w (\"can't optimize a non-leaf Tensor\"). Give the dtype when you "
            "create the tensor and scale it first, then call requires_grad_() (or scale it "
            "under torch.no_grad())."
        )
    elif not w.requires_grad:
        problems.append(
            "w does not require grad, so backward gives it no gradient: call "
            ".requires_grad_() on it last, or wrap it in nn.Parameter(...)."
        )
    if w.dtype != torch.float64:
        problems.append(
            f"w is {w.dtype}, not torch.float64: pass dtype=torch.float64 when you create it."
        )
    if list(w.shape) != [len(_VALUES)]:
        problems.append(f"w has shape {list(w.shape)}, expected [{len(_VALUES)}].")
    elif _values(w) != expected:
        problems.append(f"w holds {_values(w)}, expected {expected} (values * {_SCALE}).")
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    if problems:
        return feedback(problems)
    optimizer = torch.optim.SGD([w], lr=1.0)
    before = w.detach().clone()
    (w * w).sum().backward()
    optimizer.step()
    if torch.equal(before, w.detach()):
        return feedback(["one SGD step did not move w."])
    return feedback(
        [],
        success="Correct: a float64 leaf that requires grad; an optimizer accepts it, and one "
        "step moves it.",
    )


# -- exercise 2: a training loop that learns ------------------------------------------------------


def _why_not_moved(diff: ParamDiff, model: nn.Module) -> list[str]:
    """Messages for the parameters that did not move: no gradient, or a gradient not applied."""
    params = dict(model.named_parameters())
    no_grad = [n for n in diff.unchanged if params[n].grad is None]
    not_applied = [n for n in diff.unchanged if params[n].grad is not None]
    problems = []
    if no_grad and len(no_grad) == len(params):
        problems.append(
            "no parameter got a gradient: the loss has no graph behind it. Look for "
            f"{_CUT_CALLS} around the forward pass; loss.requires_grad = True only hides this."
        )
    elif no_grad:
        problems.append(
            f"no gradient reached {_names(no_grad)}: the graph is cut between the loss and "
            f"them. Look for {_CUT_CALLS} in the forward pass."
        )
    if not_applied:
        problems.append(
            f"{_names(not_applied)} got a gradient but did not move: the optimizer does not "
            "hold them. Build it from model.parameters() of the model you train."
        )
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
    losses, warned, err = call_learner(train, model, x, target, first_line=True)
    if err is not None:
        return feedback([_error_text(name, err)])
    if losses is Ellipsis:
        return feedback([f"{name} still returns `...`: return the list of losses."])
    ok_list = isinstance(losses, list | tuple) and all(isinstance(v, float) for v in losses)
    if not ok_list:
        return feedback(
            [
                f"{name} should return the list of losses, one float per step "
                f"(loss.item()); it returned {type(losses).__name__}."
            ]
        )
    diff = param_diff(before, model)
    problems = _why_not_moved(diff, model)
    if len(losses) < 2:
        problems.append(f"{name} returned {len(losses)} loss(es): take at least two steps.")
    elif not losses[-1] < losses[0]:
        problems.append(f"the loss did not fall: {losses[0]:.4g} at the first step, "
                        f"{losses[-1]:.4g} at the last.")
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    return feedback(
        problems,
        success=f"Correct: every parameter moved, and the loss fell from {losses[0]:.4g} to "
        f"{losses[-1]:.4g}." if len(losses) >= 2 else "Correct.",
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
        return feedback(
            ["every parameter is frozen, so nothing can learn: freeze only model.middle."]
        )
    x, target = _data()
    before = snapshot(model)
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
        nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
    except Exception as err:  # e.g. everything frozen: the loss has no graph
        return feedback([f"after {name}, a training step failed: {_error_text('it', err)}"])
    diff = param_diff(before, model)
    moved_middle = [n for n in diff.changed if n.startswith("middle.")]
    frozen_other = [n for n in diff.unchanged if not n.startswith("middle.")]
    problems = []
    if moved_middle and not model.middle.training:
        problems.append(
            f"{_names(moved_middle)} still moved: eval() switches dropout and batch norm to "
            "evaluation, it does not stop gradients. Use model.middle.requires_grad_(False)."
        )
    elif moved_middle:
        problems.append(
            f"{_names(moved_middle)} still moved: every parameter of model.middle needs "
            "requires_grad=False (model.middle.requires_grad_(False) sets them all)."
        )
    if frozen_other:
        problems.append(
            f"{_names(frozen_other)} did not move: freeze only the middle layer. A frozen layer "
            "still passes the gradient through to the layers before it."
        )
    for message in warned:
        problems.append(f"PyTorch warned: {message}")
    return feedback(
        problems,
        success="Correct: middle is frozen (no gradient, no change); first and last still learn, "
        "because the gradient flows through the frozen layer.",
    )
