"""Checker for notebook 07's leakage exercise: clip each example's returned gradient to a norm.

`check_clip(clip_rows)` calls the learner's `clip_rows(grad, max_norm)` on a few small gradients
(one row per example) and compares with per-row clipping. For the usual mistakes (clamping each
number, one factor for the whole batch, norms over the wrong dim, stretching short rows, NaN for a
zero row, changing the input in place) it says which one it saw. It never raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.checks import CheckResult, clean_message, feedback

__all__ = ["CASES", "check_clip", "clip_reference"]

#: (gradient, max_norm): rows of length 5, 0.5, 0 and 10; then rows of length 3, 0.3 and 6.
CASES = [
    (
        torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [-6.0, 8.0]], dtype=torch.float64),
        1.0,
    ),
    (torch.tensor([[1.0, 2.0, 2.0], [0.1, 0.2, 0.2], [-2.0, -4.0, 4.0]]), 1.5),
]

SUCCESS = (
    "Right: rows longer than max_norm now have exactly that length and the same direction; "
    "shorter rows (and zero rows) are unchanged."
)


def clip_reference(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Each row scaled by min(1, max_norm / its norm); a zero row stays zero."""
    norms = grad.norm(dim=1, keepdim=True)
    return grad * (max_norm / norms).clamp(max=1.0)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(
        torch.allclose(a.detach().double(), b.double(), rtol=1e-5, atol=1e-9)
    )


def _rows(t: torch.Tensor) -> str:
    return str([[round(v, 3) for v in row] for row in t.detach().double().tolist()])


def _row(t: torch.Tensor, i: int) -> str:
    return str([round(v, 3) for v in t[i].detach().double().tolist()])


def _diagnose(got: torch.Tensor, grad: torch.Tensor, max_norm: float) -> str:
    """What the learner's (wrong) result looks like, in one sentence."""
    longest = int(grad.norm(dim=1).argmax())
    if _close(got, grad.clamp(-max_norm, max_norm)):
        return (
            f"you clamped each number to [-{max_norm:g}, {max_norm:g}]: row "
            f"{_row(grad, longest)} became {_row(got, longest)}, "
            "which points in another direction. Scale each whole row by max_norm / its norm"
        )
    if _close(got, grad * min(1.0, max_norm / float(grad.norm()))):
        return (
            "you scaled the whole batch by one factor (like torch.nn.utils.clip_grad_norm_): "
            "clip each row, each example, on its own, with norms over dim=1"
        )
    columns = grad.norm(dim=0, keepdim=True)
    if _close(got, grad * (max_norm / columns).clamp(max=1.0)):
        return (
            "you took the norms over dim=0, one per feature across the batch; each example is a "
            "row: grad.norm(dim=1, keepdim=True)"
        )
    norms = grad.norm(dim=1)
    short = norms < max_norm
    if _close(got[~short], clip_reference(grad, max_norm)[~short]):
        row = int(torch.nonzero(short & (norms > 0))[0])
        return (
            f"rows shorter than max_norm changed: row {_row(grad, row)} (length "
            f"{float(norms[row]):.3g}) became {_row(got, row)}. Clipping only "
            "shrinks long rows: cap the scale factor at 1 (.clamp(max=1.0))"
        )
    return (
        f"for max_norm={max_norm:g} the rows should be {_rows(clip_reference(grad, max_norm))}, "
        f"got {_rows(got)} (row lengths {[round(v, 3) for v in got.detach().norm(dim=1).tolist()]})"
    )


def _check_case(clip: Callable, grad: torch.Tensor, max_norm: float) -> list[str]:
    given = grad.clone()
    call = f"clip_rows(grad, {max_norm:g})"
    try:
        got = clip(given, max_norm)
    except Exception as err:  # the learner's code may fail in any way
        text = clean_message(str(err)).splitlines()
        return [f"{call} raised {type(err).__name__}: {text[0] if text else ''}"]
    if got is Ellipsis:
        return ["clip_rows still returns `...`: return the clipped gradient"]
    if got is None:
        return ["clip_rows returned None: end it with `return` and the clipped gradient"]
    if not isinstance(got, torch.Tensor):
        return [f"clip_rows returned a {type(got).__name__}, not a tensor"]
    problems = []
    if not torch.equal(given, grad):
        problems.append(
            "clip_rows changed the gradient it was given (in place, e.g. with mul_ or "
            "grad[...] = ...); return a new tensor and leave the input alone"
        )
    if got.shape != grad.shape:
        hint = (
            ": that looks like one number per row, e.g. the lengths; return the clipped rows"
            if got.numel() == len(grad)
            else ""
        )
        return [
            *problems,
            f"{call} returned shape {list(got.shape)} for a gradient of shape "
            f"{list(grad.shape)}{hint}",
        ]
    if got.dtype != grad.dtype:
        problems.append(f"the result is {got.dtype} for a {grad.dtype} gradient: keep the dtype")
    if torch.isnan(got).any():
        return [
            *problems,
            "a row of zeros became NaN (0 / 0 when dividing by its length 0): "
            "compute the factor max_norm / norm and cap it with .clamp(max=1.0), which turns "
            "inf into 1, or leave zero rows alone",
        ]
    if not _close(got, clip_reference(grad, max_norm)):
        problems.append(_diagnose(got, grad, max_norm))
    return problems


def check_clip(clip: Callable[[torch.Tensor, float], torch.Tensor]) -> CheckResult:
    """Check `clip(grad, max_norm)`: each row of `grad` clipped to length `max_norm`."""
    if clip is Ellipsis:
        return feedback(["clip_rows is still `...`: define it as a function"])
    if not callable(clip):
        return feedback([f"clip_rows is a {type(clip).__name__}, not a function"])
    for grad, max_norm in CASES:
        problems = _check_case(clip, grad, max_norm)
        if problems:
            return feedback(problems)
    return feedback([], success=SUCCESS)
