"""Checker for notebook 07b's exercise: split one stage's backward the way zero-bubble schedules do.

`check_input_then_weights(input_then_weights)` calls the learner's
`input_then_weights(output, grad, received, weights)` on a stage like model 2 (two linear layers
on a received activation). It must return `(input_grad, finish)`: the gradient for `received`,
computed without writing any weight's `.grad`, and a function that then accumulates the weights'
gradients. Both must equal what one full `output.backward(grad)` gives. For the usual mistakes (a
full backward in the first part, a freed graph, `torch.autograd.grad` where `.grad` must be filled,
the input's gradient computed again in `finish`) it says which one it saw. It never raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from helpers.checks import CheckResult, clean_message, feedback
from helpers.language import say

__all__ = ["check_input_then_weights", "stage_case"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "07b_pipeline_and_data_parallel"


def stage_case(seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A stage (two linear layers), what arrived from the previous stage, the gradient that came
    back from the next one: all seeded."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    stage = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6))
    received = torch.randn(4, 6, generator=gen)
    grad = torch.randn(4, 6, generator=gen)
    return stage, received, grad


def _reference(seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    stage, received, grad = stage_case(seed)
    received.requires_grad_(True)
    stage(received).backward(grad)
    return received.grad, [p.grad for p in stage.parameters()]


def _error(err: BaseException) -> str:
    lines = clean_message(str(err)).splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def _close(a: object, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def _check(split: Callable, seed: int) -> list[str]:
    want_input, want_weights = _reference(seed)
    stage, received, grad = stage_case(seed)
    received.requires_grad_(True)
    output = stage(received)
    weights = list(stage.parameters())
    try:
        got = split(output, grad, received, weights)
    except Exception as err:  # the learner's code may fail in any way
        return [say(TEXT, "feedback.raised", error=_error(err))]
    if got is Ellipsis or got is None:
        return [say(TEXT, "feedback.returns_nothing")]
    if not (isinstance(got, tuple) and len(got) == 2):
        return [say(TEXT, "feedback.not_a_pair", type=type(got).__name__)]
    input_grad, finish = got
    if any(p.grad is not None for p in weights):
        return [say(TEXT, "feedback.weights_too_early")]
    if not _close(input_grad, want_input):
        if isinstance(input_grad, torch.Tensor) and _close(input_grad, grad):
            return [say(TEXT, "feedback.gave_back_grad")]
        return [say(TEXT, "feedback.wrong_input_grad")]
    if not callable(finish):
        return [say(TEXT, "feedback.finish_not_callable", type=type(finish).__name__)]
    before = None if received.grad is None else received.grad.clone()
    try:
        finish()
    except RuntimeError as err:
        if "second time" in str(err):
            return [say(TEXT, "feedback.graph_freed")]
        return [say(TEXT, "feedback.finish_raised", error=_error(err))]
    except Exception as err:
        return [say(TEXT, "feedback.finish_raised", error=_error(err))]
    if any(p.grad is None for p in weights):
        return [say(TEXT, "feedback.weights_not_filled")]
    if not all(_close(p.grad, w) for p, w in zip(weights, want_weights, strict=True)):
        return [say(TEXT, "feedback.wrong_weight_grads")]
    after = received.grad
    if after is not None and (before is None or not torch.equal(after, before)):
        return [say(TEXT, "feedback.input_again")]
    return []


def check_input_then_weights(split: Callable) -> CheckResult:
    """Check `split(output, grad, received, weights) -> (input_grad, finish)` on two stages."""
    if split is Ellipsis:
        return feedback([say(TEXT, "feedback.unfilled")])
    if not callable(split):
        return feedback([say(TEXT, "feedback.not_function", type=type(split).__name__)])
    for seed in (0, 1):
        problems = _check(split, seed)
        if problems:
            return feedback(problems)
    return feedback([], success=say(TEXT, "feedback.success"))
