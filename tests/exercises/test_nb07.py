"""Checker of notebook 07's leakage exercise: right answers pass, typical wrong answers get the
specific message."""

import re

import pytest
import torch

from helpers.exercises.nb07 import CASES, check_clip, clip_reference
from tests.exercises.common import text


def solution(grad, max_norm):
    norms = grad.norm(dim=1, keepdim=True)
    return grad * (max_norm / norms).clamp(max=1.0)


def with_where(grad, max_norm):
    norms = grad.norm(dim=1, keepdim=True)
    return torch.where(norms > max_norm, grad * max_norm / norms, grad)


@pytest.mark.parametrize(
    "clip",
    [
        solution,
        with_where,
        lambda g, c: torch.renorm(g, 2, 0, c),  # torch's own per-row renormalisation
        lambda g, c: g * (c / (g.norm(dim=1, keepdim=True) + 1e-12)).clamp(max=1.0),
        clip_reference,
    ],
    ids=["solution", "where", "renorm", "epsilon", "reference"],
)
def test_right_answers_pass(clip):
    result = check_clip(clip)
    assert result.ok, result
    assert "exactly that length and the same direction" in repr(result)


def test_the_reference_clips_rows_and_keeps_zero_rows():
    grad, max_norm = CASES[0]
    clipped = clip_reference(grad, max_norm)
    torch.testing.assert_close(clipped.norm(dim=1), torch.tensor([1.0, 0.5, 0.0, 1.0]).double())


WRONG = [
    ("still a placeholder", lambda g, c: ..., "still returns `...`"),
    ("no return", lambda g, c: None, "returned None"),
    ("a number", lambda g, c: 1.0, "returned a float, not a tensor"),
    (
        "clamps each number",
        lambda g, c: g.clamp(-c, c),
        r"clamped each number to \[-1, 1\]: row \[-6.0, 8.0\] became \[-1.0, 1.0\]",
    ),
    (
        "one factor for the batch",
        lambda g, c: g * min(1.0, c / float(g.norm())),
        "whole batch by one factor",
    ),
    (
        "norms over dim 0",
        lambda g, c: g * (c / g.norm(dim=0, keepdim=True)).clamp(max=1.0),
        "norms over dim=0",
    ),
    (
        "stretches short rows",
        lambda g, c: g * (c / g.norm(dim=1, keepdim=True).clamp(min=1e-30)),
        r"rows shorter than max_norm changed: row \[0.3, 0.4\] \(length 0.5\) became \[0.6, 0.8\]",
    ),
    (
        "NaN for the zero row",
        lambda g, c: g / g.norm(dim=1, keepdim=True) * g.norm(dim=1, keepdim=True).clamp(max=c),
        "a row of zeros became NaN",
    ),
    (
        "in place",
        lambda g, c: g.mul_((c / g.norm(dim=1, keepdim=True)).clamp(max=1.0)),
        "changed the gradient it was given",
    ),
    ("returns the norms", lambda g, c: g.norm(dim=1).clamp(max=c), "one number per row"),
    ("changes the dtype", lambda g, c: solution(g, c).float(), "keep the dtype"),
    ("crashes", lambda g, c: g.norm(dim=2), r"clip_rows\(grad, 1\) raised IndexError"),
    (
        "wrong length",
        lambda g, c: solution(g, c) * 0.9,
        r"should be \[\[0.6, 0.8\].*row lengths \[0.9, 0.45, 0.0, 0.9\]",
    ),
    (
        "only works for two columns",
        lambda g, c: solution(g[:, :2], c) if g.shape[1] == 2 else g,
        "for max_norm=1.5 the rows should be",
    ),
]


@pytest.mark.parametrize(("clip", "message"), [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_wrong_answers_get_their_message(clip, message):
    result = check_clip(clip)
    assert not result.ok
    assert len(result.messages) >= 1
    assert re.search(message, text(result)), text(result)


def raises_without_a_message(grad, max_norm):
    raise ValueError()


def raises_two_lines(grad, max_norm):
    raise ValueError("first line\nsecond line")


def stretches_short_rows_a_little(grad, max_norm):
    norms = grad.norm(dim=1, keepdim=True)
    return torch.where(norms > max_norm, solution(grad, max_norm), grad * 1.2345)


IN_FULL = [
    ("placeholder", lambda g, c: ..., "clip_rows still returns `...`: return the clipped gradient"),
    (
        "no return",
        lambda g, c: None,
        "clip_rows returned None: end it with `return` and the clipped gradient",
    ),
    (
        "clamps each number",
        lambda g, c: g.clamp(-c, c),
        "you clamped each number to [-1, 1]: row [-6.0, 8.0] became [-1.0, 1.0], which points in "
        "another direction. Scale each whole row by max_norm / its norm",
    ),
    (
        "one factor for the batch",
        lambda g, c: g * min(1.0, c / float(g.norm())),
        "you scaled the whole batch by one factor (like torch.nn.utils.clip_grad_norm_): clip "
        "each row, each example, on its own, with norms over dim=1",
    ),
    (
        "norms over dim 0",
        lambda g, c: g * (c / g.norm(dim=0, keepdim=True)).clamp(max=1.0),
        "you took the norms over dim=0, one per feature across the batch; each example is a row: "
        "grad.norm(dim=1, keepdim=True)",
    ),
    (
        "stretches short rows",  # numbers shown to 3 decimals
        stretches_short_rows_a_little,
        "rows shorter than max_norm changed: row [0.3, 0.4] (length 0.5) became [0.37, 0.494]. "
        "Clipping only shrinks long rows: cap the scale factor at 1 (.clamp(max=1.0))",
    ),
    (
        "NaN for the zero row",
        lambda g, c: g / g.norm(dim=1, keepdim=True) * g.norm(dim=1, keepdim=True).clamp(max=c),
        "a row of zeros became NaN (0 / 0 when dividing by its length 0): compute the factor "
        "max_norm / norm and cap it with .clamp(max=1.0), which turns inf into 1, or leave zero "
        "rows alone",
    ),
    (
        "returns the norms",
        lambda g, c: g.norm(dim=1).clamp(max=c),
        "clip_rows(grad, 1) returned shape [4] for a gradient of shape [4, 2]: that looks like "
        "one number per row, e.g. the lengths; return the clipped rows",
    ),
    (
        "flattens",
        lambda g, c: solution(g, c).flatten(),
        "clip_rows(grad, 1) returned shape [8] for a gradient of shape [4, 2]",
    ),
    (
        "slightly short",  # numbers shown to 3 decimals
        lambda g, c: solution(g, c) * 0.9001,
        "for max_norm=1 the rows should be [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0], [-0.6, 0.8]], "
        "got [[0.54, 0.72], [0.27, 0.36], [0.0, 0.0], [-0.54, 0.72]] (row lengths "
        "[0.9, 0.45, 0.0, 0.9])",
    ),
    ("error without a message", raises_without_a_message, "clip_rows(grad, 1) raised ValueError: "),
    ("error of two lines", raises_two_lines, "clip_rows(grad, 1) raised ValueError: first line"),
]


@pytest.mark.parametrize(("clip", "message"), [w[1:] for w in IN_FULL], ids=[w[0] for w in IN_FULL])
def test_messages_in_full(clip, message):
    assert check_clip(clip).messages == [message]


def test_in_place_change_is_named_in_full():
    result = check_clip(lambda g, c: g.mul_((c / g.norm(dim=1, keepdim=True)).clamp(max=1.0)))
    assert result.messages == [
        "clip_rows changed the gradient it was given (in place, e.g. with mul_ or grad[...] = "
        "...); return a new tensor and leave the input alone"
    ]


def test_a_zero_row_must_stay_zero_within_1e_9():
    assert check_clip(lambda g, c: solution(g, c) + 5e-10).ok
    assert not check_clip(lambda g, c: solution(g, c) + 5e-9).ok


def test_not_a_function():
    assert check_clip(...).messages == ["clip_rows is still `...`: define it as a function"]
    assert check_clip(3).messages == ["clip_rows is an int, not a function"]


def test_the_cases_are_not_changed_by_a_checker_run():
    before = [g.clone() for g, _ in CASES]
    check_clip(lambda g, c: g.mul_(0.5))
    assert all(torch.equal(a, g) for a, (g, _) in zip(before, CASES, strict=True))


def test_only_the_zero_row_off_is_named_as_the_zero_row():
    """A clip right everywhere but on a row of zeros (divided by a zero norm, then patched
    badly): the message names that row, not a shorter row that did not change."""

    def clip(g, c):
        out = solution(g, c)
        zero = g.norm(dim=1) == 0
        out[zero] = 0.01
        return out

    (message,) = check_clip(clip).messages
    assert message.startswith("a row of zeros must stay zeros, but row 2 became [0.01, ")


def test_a_result_in_another_dtype_names_both_dtypes():
    assert check_clip(lambda g, m: clip_reference(g, m).float()).messages == [
        "the result is torch.float32 for a torch.float64 gradient: keep the dtype"
    ]


def test_row_norms_without_keepdim_are_named_when_they_fail_to_broadcast():
    def no_keepdim(grad, max_norm):
        return grad * (max_norm / grad.norm(dim=1)).clamp(max=1.0)

    assert check_clip(no_keepdim).messages == [
        "clip_rows(grad, 1) raised RuntimeError: The size of tensor a (2) must match the size of "
        "tensor b (4) at non-singleton dimension 1: the row norms have shape [4] and do not line "
        "up with the rows of grad, [4, 2]. Keep the dimension, grad.norm(dim=1, keepdim=True), "
        "so that each row is scaled by its own norm"
    ]


def test_row_norms_without_keepdim_are_named_when_they_broadcast_along_columns():
    def no_keepdim_when_square(grad, max_norm):
        if grad.shape[0] != grad.shape[1]:
            return clip_reference(grad, max_norm)
        return grad * (max_norm / grad.norm(dim=1)).clamp(max=1.0)

    assert check_clip(no_keepdim_when_square).messages == [
        "each column was scaled by a row's norm: the row norms, taken without keepdim=True, "
        "broadcast along the columns of a square [3, 3] grad. Keep the dimension: "
        "grad.norm(dim=1, keepdim=True)"
    ]
