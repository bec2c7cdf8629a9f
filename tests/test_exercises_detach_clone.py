"""helpers.exercises.detach_clone: right answers pass, typical wrong answers get a specific hint."""

import pytest
import torch

from helpers.checks import CheckResult
from helpers.exercises.detach_clone import check_cut, check_sgd_update, check_snapshot


def placeholder(*_):
    """What the notebook's exercise cell holds before the learner writes anything."""
    return ...


def only_hint(result: CheckResult, fragment: str) -> None:
    assert not result.ok
    assert any(fragment in m for m in result.messages), result.messages
    assert "Not yet" in repr(result)


# -- take_snapshot ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [lambda w: w.detach().clone(), lambda w: w.clone().detach()],
    ids=["detach-clone", "clone-detach"],
)
def test_snapshot_right_answers_pass(answer):
    result = check_snapshot(answer)
    assert result.ok, result
    assert repr(result).startswith("✅")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (placeholder, "still returns `...`"),
        (lambda w: None, "forget `return`"),
        (lambda w: w.tolist(), "returned a list"),
        (lambda w: w, "returned w itself"),
        (lambda w: w.detach(), "shares memory with w"),
        (lambda w: w.data, "shares memory with w"),
        (lambda w: w.clone(), "grad_fn CloneBackward0"),
        (lambda w: w.detach().clone() * 0, "but w holds"),
        (lambda w: torch.tensor(w), "PyTorch warned: To copy construct from a tensor"),
        (lambda w: w.detach().clone().requires_grad_(), "requires grad"),
    ],
    ids=[
        "placeholder", "none", "list", "itself", "detach", "data", "clone", "values", "tensor",
        "requires-grad",
    ],
)
def test_snapshot_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_snapshot(answer), hint)


def test_snapshot_checker_reports_errors_instead_of_raising():
    def broken(w):
        return w.no_such_method()

    only_hint(check_snapshot(broken), "raised AttributeError")
    only_hint(check_snapshot(42), "pass the function itself")


# -- cut ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        lambda f1: f1.detach().clone().requires_grad_(True),
        lambda f1: f1.clone().detach().requires_grad_(True),  # the post's order
        lambda f1: f1.detach().clone().requires_grad_(),
    ],
    ids=["detach-clone", "clone-detach", "default-flag"],
)
def test_cut_right_answers_pass(answer):
    result = check_cut(answer)
    assert result.ok, result


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (placeholder, "still returns `...`"),
        (lambda f1: f1, "returned f1 itself"),
        (lambda f1: f1.clone().detach(), "did you call requires_grad_() on the cut?"),
        (lambda f1: f1.clone().requires_grad_(True), "still connected to f1's graph"),
        (lambda f1: f1.clone(), "grad_fn CloneBackward0"),
        (lambda f1: f1.detach().requires_grad_(True), "shares memory with f1"),
        (lambda f1: (f1 * 2).detach().requires_grad_(True), "but f1 holds"),
    ],
    ids=["placeholder", "itself", "no-flag", "no-detach", "clone-only", "no-clone", "values"],
)
def test_cut_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_cut(answer), hint)


def test_cut_checker_reports_errors_instead_of_raising():
    def broken(f1):
        return f1.requires_grad_(False)  # a non-leaf: torch refuses

    only_hint(check_cut(broken), "only change requires_grad flags of leaf variables")


# -- sgd_update ---------------------------------------------------------------------------------


def sgd_no_grad(w, lr):
    with torch.no_grad():
        w -= lr * w.grad


def sgd_detach(w, lr):
    w.detach().sub_(lr * w.grad)


def sgd_then_zero(w, lr):
    with torch.no_grad():
        w.sub_(lr * w.grad)
    w.grad.zero_()


@pytest.mark.parametrize("answer", [sgd_no_grad, sgd_detach, sgd_then_zero])
def test_sgd_right_answers_pass(answer):
    result = check_sgd_update(answer)
    assert result.ok, result


def sgd_placeholder(w, lr):
    ...


def sgd_data(w, lr):
    w.data -= lr * w.grad


def sgd_rebind(w, lr):
    w = w - lr * w.grad  # the mistake under test: rebinds the local name only


def sgd_no_no_grad(w, lr):
    w -= lr * w.grad


def sgd_plus(w, lr):
    with torch.no_grad():
        w += lr * w.grad


def sgd_wrong_lr(w, lr):
    with torch.no_grad():
        w -= w.grad


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (sgd_placeholder, "w did not change"),
        (sgd_rebind, "only rebinds the local name"),
        (sgd_data, "version counter did not move"),
        (sgd_no_no_grad, "inside `with torch.no_grad():`"),
        (sgd_plus, "moved up the gradient"),
        (sgd_wrong_lr, "expected [0.5, 1.0, 1.5]"),
    ],
    ids=["placeholder", "rebind", "data", "no-no-grad", "plus", "wrong-lr"],
)
def test_sgd_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_sgd_update(answer), hint)
