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
learner's run matches. A run that matches none of them is read through the calls it made (the
checker's GradScaler notes each call, the optimizer and the network each step and forward): a
forward outside float16 autocast, the loss scaled twice, the optimizer stepped twice, the
scaler's calls out of order, a loss other than the mean squared error. It never raises.
"""

from __future__ import annotations

import functools
import math
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
#: Per step, what the learner's step did, in order: ("forward", net's output), ("scale", what
#: scaler.scale was given), ("unscale_", None), ("step", None), ("optimizer.step", None),
#: ("update", None).
Calls = list[list[tuple[str, torch.Tensor | None]]]


class _Watched(torch.amp.GradScaler):
    """A CPU GradScaler that writes down each call the learner's step makes of it (not the
    unscale_ that its own step() makes), and what scaler.scale was given."""

    def __init__(self, calls: Calls, init_scale: float) -> None:
        super().__init__("cpu", init_scale=init_scale)
        self.calls = calls
        self._inside_step = False

    def _note(self, name: str, given: object = None) -> None:
        if not self._inside_step and self.calls:
            kept = given.detach().float().clone() if isinstance(given, torch.Tensor) else None
            self.calls[-1].append((name, kept))

    def scale(self, outputs):  # type: ignore[override]
        self._note("scale", outputs)
        return super().scale(outputs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self._note("unscale_")
        super().unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer, *args, **kwargs):  # type: ignore[override]
        self._note("step")
        self._inside_step = True
        try:
            return super().step(optimizer, *args, **kwargs)
        finally:
            self._inside_step = False

    def update(self, new_scale=None) -> None:  # type: ignore[override]
        self._note("update")
        super().update(new_scale)


def _run(
    step: Callable, seed: int, backwards: list[int] | None = None, calls: Calls | None = None
) -> Run:
    """The weights and the scale after each of the four steps; `backwards`, when given, gets how
    many backward passes reached the network in each step, and `calls` what each step called."""
    net, _, _ = small_network(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    calls = [] if calls is None else calls
    scaler = _Watched(calls, init_scale=SCALE)
    optimizer.register_step_post_hook(lambda *args: calls[-1].append(("optimizer.step", None)))
    net.register_forward_hook(lambda m, i, out: calls[-1].append(("forward", out.detach())))
    reached = [0]
    first = next(iter(net.parameters()))
    first.register_hook(lambda grad: reached.__setitem__(0, reached[0] + 1))
    after = []
    for x, y in amp_batches(seed):
        reached[0] = 0
        calls.append([])
        try:
            step(net, x, y, optimizer, scaler, MAX_NORM)
        finally:  # counted for a step that raised too: the checker says what it saw
            if backwards is not None:
                backwards.append(reached[0])
        after.append(([p.detach().clone() for p in net.parameters()], scaler.get_scale()))
    return after


def _before(names: list[str], first: str, then: str) -> bool:
    """Whether the step called `first` before `then`, both at least once."""
    return first in names and then in names and names.index(first) < names.index(then)


def _order_problem(calls: Calls) -> str | None:
    """A step that called the scaler out of order: its message, else None."""
    for names in ([n for n, _ in step] for step in calls):
        if _before(names, "step", "unscale_"):
            return say(TEXT, "feedback.unscale_after_step")
        if _before(names, "update", "step"):
            return say(TEXT, "feedback.update_before_step")
    return None


def _close_number(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-4)


def _trace_problem(calls: Calls) -> str | None:
    """What the learner's run did differently, read from the calls it made: net's forward in
    another dtype, scaler.scale or the optimizer's step called twice, the scaler's calls out of
    order, a loss other than the mean squared error. None when none of these shows."""
    for events, (_, y) in zip(calls, amp_batches(), strict=True):
        names = [n for n, _ in events]
        outputs = [t for n, t in events if n == "forward"]
        if outputs and outputs[-1].dtype != torch.float16:
            key = "bfloat16" if outputs[-1].dtype == torch.bfloat16 else "float32"
            return say(TEXT, f"feedback.forward_{key}")
        if names.count("scale") > 1:
            return say(TEXT, "feedback.scaled_twice", times=names.count("scale"))
        if names.count("optimizer.step") > 1:
            return say(TEXT, "feedback.stepped_twice", times=names.count("optimizer.step"))
        order = _order_problem([events])
        if order:
            return order
        losses = [t for n, t in events if n == "scale" and t is not None and t.numel() == 1]
        if outputs and losses:
            mse = float(nn.functional.mse_loss(outputs[-1].float(), y))
            loss = float(losses[-1])
            if _close_number(loss, mse * y.numel()):
                return say(TEXT, "feedback.loss_summed", count=y.numel())
            if not _close_number(loss, mse):
                return say(TEXT, "feedback.loss_not_mse", value=round(loss, 4), mse=round(mse, 4))
    return None


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
    calls: Calls = []
    try:
        run = _run(amp_step, 0, backwards, calls)
    except Exception as err:  # the learner's code may fail in any way
        text = str(err)
        given = [t for n, t in calls[-1] if n == "scale"]  # _run adds a step's list first
        if "outputs must be a Tensor" in text and given and given[-1] is None:
            return feedback([say(TEXT, "feedback.scale_of_none")])
        if "Attempting to unscale FP16 gradients" in text:
            return feedback([say(TEXT, "feedback.half_weights", error=error_line(err))])
        if "being called after step()" in text:  # which call the step put out of order
            return feedback([_order_problem(calls[-2:]) or say(TEXT, "feedback.no_update")])
        gradless = "did not use scaler.scale" in text or "No inf checks were recorded" in text
        if gradless and not backwards[-1]:  # GradScaler found no gradient: none was computed
            return feedback([say(TEXT, "feedback.no_backward")])
        if "unscale_() has already been called" in text:
            return feedback([say(TEXT, "feedback.unscaled_twice")])
        if "did not use scaler.scale" in text:
            return feedback([say(TEXT, "feedback.no_scale")])
        if "No inf checks were recorded" in text:  # backward ran, and .grad was empty after it
            return feedback([say(TEXT, "feedback.grads_cleared")])
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
    problem = _trace_problem(calls)
    if problem:
        return feedback([problem])
    right = _known("right", 0)
    step = next(i for i in range(len(run)) if not _same(run[i : i + 1], right[i : i + 1]))
    return feedback([say(TEXT, "feedback.differs", step=step + 1)])
