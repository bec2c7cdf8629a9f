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
from helpers.language import say
from helpers.shapes import shape_text

__all__ = ["CASES", "check_clip", "clip_reference"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "07_split_across_processes"

#: (gradient, max_norm): rows of length 5, 0.5, 0 and 10; then rows of length 3, 0.3 and 6.
CASES = [
    (
        torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [-6.0, 8.0]], dtype=torch.float64),
        1.0,
    ),
    (torch.tensor([[1.0, 2.0, 2.0], [0.1, 0.2, 0.2], [-2.0, -4.0, 4.0]]), 1.5),
]


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
        return say(
            TEXT,
            "feedback.clamped_numbers",
            max_norm=f"{max_norm:g}",
            row=_row(grad, longest),
            got=_row(got, longest),
        )
    if _close(got, grad * min(1.0, max_norm / float(grad.norm()))):
        return say(TEXT, "feedback.one_factor")
    per_column = (max_norm / grad.norm(dim=1)).clamp(max=1.0)  # row norms without keepdim
    if grad.shape[0] == grad.shape[1] and _close(got, grad * per_column):
        return say(TEXT, "feedback.no_keepdim", shape=shape_text(grad))
    columns = grad.norm(dim=0, keepdim=True)
    if _close(got, grad * (max_norm / columns).clamp(max=1.0)):
        return say(TEXT, "feedback.norms_over_dim0")
    norms = grad.norm(dim=1)
    short = norms < max_norm
    if _close(got[~short], clip_reference(grad, max_norm)[~short]):
        changed = [
            i for i in torch.nonzero(short).flatten().tolist() if not _close(got[i], grad[i])
        ]
        # Never empty: right on the long rows and unchanged on the short ones is right overall.
        row = changed[0]
        if norms[row] == 0:
            return say(TEXT, "feedback.zero_row_changed", index=row, got=_row(got, row))
        return say(
            TEXT,
            "feedback.short_rows_changed",
            row=_row(grad, row),
            length=f"{float(norms[row]):.3g}",
            got=_row(got, row),
        )
    return say(
        TEXT,
        "feedback.wrong_rows",
        max_norm=f"{max_norm:g}",
        expected=_rows(clip_reference(grad, max_norm)),
        got=_rows(got),
        lengths=[round(v, 3) for v in got.detach().norm(dim=1).tolist()],
    )


def _check_case(clip: Callable, grad: torch.Tensor, max_norm: float) -> list[str]:
    given = grad.clone()
    call = f"clip_rows(grad, {max_norm:g})"
    try:
        got = clip(given, max_norm)
    except Exception as err:  # the learner's code may fail in any way
        text = clean_message(str(err)).splitlines()
        error = f"{type(err).__name__}: {text[0] if text else ''}"
        if "must match the size of tensor" in str(err):  # row norms of shape [N] against [N, D]
            return [
                say(
                    TEXT,
                    "feedback.raised_no_keepdim",
                    call=call,
                    error=error,
                    rows=len(grad),
                    shape=shape_text(grad),
                )
            ]
        return [say(TEXT, "feedback.raised", call=call, error=error)]
    if got is Ellipsis:
        return [say(TEXT, "feedback.returns_placeholder")]
    if got is None:
        return [say(TEXT, "feedback.returned_none")]
    if not isinstance(got, torch.Tensor):
        return [say(TEXT, "feedback.not_a_tensor", type=type(got).__name__)]
    problems = []
    if not torch.equal(given, grad):
        problems.append(say(TEXT, "feedback.changed_input"))
    if got.shape != grad.shape:
        key = "wrong_shape_lengths" if got.numel() == len(grad) else "wrong_shape"
        problem = say(
            TEXT, f"feedback.{key}", call=call, shape=shape_text(got), grad_shape=shape_text(grad)
        )
        return [*problems, problem]
    if got.dtype != grad.dtype:
        problems.append(say(TEXT, "feedback.wrong_dtype", dtype=got.dtype, grad_dtype=grad.dtype))
    if torch.isnan(got).any():
        return [*problems, say(TEXT, "feedback.nan_zero_row")]
    if not _close(got, clip_reference(grad, max_norm)):
        problems.append(_diagnose(got, grad, max_norm))
    return problems


def check_clip(clip: Callable[[torch.Tensor, float], torch.Tensor]) -> CheckResult:
    """Check `clip(grad, max_norm)`: each row of `grad` clipped to length `max_norm`."""
    if clip is Ellipsis:
        return feedback([say(TEXT, "feedback.clip_unfilled")])
    if not callable(clip):
        return feedback([say(TEXT, "feedback.clip_not_function", type=type(clip).__name__)])
    for grad, max_norm in CASES:
        problems = _check_case(clip, grad, max_norm)
        if problems:
            return feedback(problems)
    return feedback([], success=say(TEXT, "feedback.success"))
