"""Checker of notebook 07's leakage exercise: right answers pass, typical wrong answers get the
specific message."""

import re

import pytest
import torch

from helpers.exercises.leakage import CASES, check_clip, clip_reference


def text(result):
    return "\n".join(result.messages)


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


def test_not_a_function():
    assert "still `...`" in text(check_clip(...))
    assert "is a int, not a function" in text(check_clip(3))


def test_the_cases_are_not_changed_by_a_checker_run():
    before = [g.clone() for g, _ in CASES]
    check_clip(lambda g, c: g.mul_(0.5))
    assert all(torch.equal(a, g) for a, (g, _) in zip(before, CASES, strict=True))
