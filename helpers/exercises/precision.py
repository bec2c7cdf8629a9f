"""Checker for notebook 09b's exercise: one mixed-precision training step with GradScaler and
gradient clipping, in the right order.

`check_amp_step(amp_step)` calls the learner's `amp_step(net, x, y, optimizer, scaler, max_norm)`
on four batches (the third one overflows in fp16 once scaled) and follows the weights and the
scale after each step. The right step zeroes the gradients, computes the loss under fp16
autocast, runs backward from `scaler.scale(loss)`, calls `scaler.unscale_(optimizer)` before
clipping, steps with `scaler.step(optimizer)` and ends with `scaler.update()`. Each usual
mistake makes a different run: GradScaler itself refuses a step without `scaler.scale` or
without `update()` (the checker explains its error); the others (no `zero_grad()`, no clip,
`optimizer.step()`, clipping before `unscale_`, which is what leaving `unscale_` out does too,
since `scaler.step` then unscales after the clip) the checker runs itself and names the one the
learner's run matches. It never raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from helpers.checks import (
    CheckResult,
    error_line,
    feedback,
    only_a_placeholder,
)
from helpers.language import say
from helpers.precision import SCALE, small_network

__all__ = ["MISTAKES", "amp_batches", "check_amp_step", "right_step"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "09b_mixed_precision_and_module_hooks"
MAX_NORM = 0.25


def amp_batches(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Four batches: two ordinary ones, one with an input of 1e5, whose scaled gradient
    overflows fp16 (GradScaler must skip that step and halve its scale), and an ordinary one."""
    _, x, y = small_network(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    other = torch.randn(64, 16, generator=gen)
    huge = other.clone()
    huge[0, 0] = 1e5
    return [(x, y), (other, y), (huge, y), (x, y)]


def _loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.float16):
        return nn.functional.mse_loss(net(x), y)


def right_step(net, x, y, optimizer, scaler, max_norm):
    optimizer.zero_grad()
    scaler.scale(_loss(net, x, y)).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _no_zero_grad(net, x, y, optimizer, scaler, max_norm):
    scaler.scale(_loss(net, x, y)).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _clip_first(net, x, y, optimizer, scaler, max_norm):
    optimizer.zero_grad()
    scaler.scale(_loss(net, x, y)).backward()
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()


def _no_clip(net, x, y, optimizer, scaler, max_norm):
    optimizer.zero_grad()
    scaler.scale(_loss(net, x, y)).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()


def _optimizer_step(net, x, y, optimizer, scaler, max_norm):
    optimizer.zero_grad()
    scaler.scale(_loss(net, x, y)).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    optimizer.step()
    scaler.update()


#: The usual mistakes, each written out, with the key of its message in [feedback].
MISTAKES: dict[str, Callable] = {
    "no_zero_grad": _no_zero_grad,
    "clip_first": _clip_first,
    "no_clip": _no_clip,
    "optimizer_step": _optimizer_step,
}


Run = list[tuple[list[torch.Tensor], float]]


def _run(step: Callable, seed: int, backwards: list[int] | None = None) -> Run:
    """The weights and the scale after each of the four steps; `backwards`, when given, gets how
    many backward passes reached the network in each step."""
    net, _, _ = small_network(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    reached = [0]
    first = next(iter(net.parameters()))
    first.register_hook(lambda grad: reached.__setitem__(0, reached[0] + 1))
    after = []
    for x, y in amp_batches(seed):
        reached[0] = 0
        try:
            step(net, x, y, optimizer, scaler, MAX_NORM)
        finally:  # counted for a step that raised too: the checker says what it saw
            if backwards is not None:
                backwards.append(reached[0])
        after.append(([p.detach().clone() for p in net.parameters()], scaler.get_scale()))
    return after


@functools.cache
def _known(name: str, seed: int) -> Run:
    """The run of the right step ("right"), of no step ("none") or of one of MISTAKES."""
    step = {"right": right_step, "none": lambda *args: None, **MISTAKES}[name]
    return _run(step, seed)


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(p, q, atol=1e-6, equal_nan=True) for p, q in zip(a, b, strict=True))


def _same(a: Run, b: Run) -> bool:
    return all(sa == sb and _close(wa, wb) for (wa, sa), (wb, sb) in zip(a, b, strict=True))


def check_amp_step(amp_step: Callable) -> CheckResult:
    """Check `amp_step(net, x, y, optimizer, scaler, max_norm)` (see the module docstring)."""
    if amp_step is Ellipsis or (callable(amp_step) and only_a_placeholder(amp_step)):
        return feedback([say(TEXT, "feedback.unfilled")])
    if not callable(amp_step):
        return feedback([say(TEXT, "feedback.not_function", type=type(amp_step).__name__)])
    backwards: list[int] = []
    try:
        run = _run(amp_step, 0, backwards)
    except Exception as err:  # the learner's code may fail in any way
        text = str(err)
        gradless = "did not use scaler.scale" in text or "No inf checks were recorded" in text
        if gradless and not backwards[-1]:  # GradScaler found no gradient: none was computed
            return feedback([say(TEXT, "feedback.no_backward")])
        if "unscale_() has already been called" in text:
            return feedback([say(TEXT, "feedback.unscaled_twice")])
        if "did not use scaler.scale" in text:
            return feedback([say(TEXT, "feedback.no_scale")])
        if "No inf checks were recorded" in text:  # backward ran, and .grad was empty after it
            return feedback([say(TEXT, "feedback.grads_cleared")])
        if "being called after step()" in text:
            return feedback([say(TEXT, "feedback.no_update")])
        return feedback([say(TEXT, "feedback.raised", error=error_line(err))])
    if max(backwards) > 1:  # the clip to max_norm hides doubled gradients: count the passes
        return feedback([say(TEXT, "feedback.backward_twice", times=max(backwards))])
    if _same(run, _known("right", 0)):
        return feedback([], success=say(TEXT, "feedback.success"))
    if _same(run, _known("none", 0)):
        return feedback([say(TEXT, "feedback.nothing_moved")])
    for key in MISTAKES:
        if _same(run, _known(key, 0)):
            return feedback([say(TEXT, f"feedback.{key}")])
    right = _known("right", 0)
    step = next(i for i in range(len(run)) if not _same(run[i : i + 1], right[i : i + 1]))
    return feedback([say(TEXT, "feedback.differs", step=step + 1)])
