"""helpers.exercises.nb03: right answers pass, typical wrong answers get a specific hint."""

import warnings

import pytest
import torch

from helpers.checks import CheckResult
from helpers.exercises.nb03 import check_cut, check_sgd_update, check_snapshot


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
    assert repr(result) == (
        "✅ Correct: a copy (own memory), outside the graph, unchanged by updates of w."
    )


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
        "placeholder",
        "none",
        "list",
        "itself",
        "detach",
        "data",
        "clone",
        "values",
        "tensor",
        "requires-grad",
    ],
)
def test_snapshot_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_snapshot(answer), hint)


def test_snapshot_checker_reports_errors_instead_of_raising():
    def broken(w):
        return w.no_such_method()

    only_hint(check_snapshot(broken), "take_snapshot(w) raised AttributeError")
    assert check_snapshot(42).messages == [
        "pass the function itself: check_snapshot(take_snapshot), not an int."
    ]


SHARES_W = (
    "the snapshot shares memory with w (detach() and .data copy nothing): the next in-place "
    "update of w would change it too. Add .clone()."
)


@pytest.mark.parametrize(
    ("answer", "messages"),
    [
        (
            placeholder,
            [
                "take_snapshot(w) still returns `...`: replace the `...` with an expression built "
                "from w."
            ],
        ),
        (lambda w: w.detach().clone()[:2], ["the snapshot has shape [2], w has [3]."]),
        (
            lambda w: w.clone(),
            [
                "the snapshot is still in the graph (grad_fn CloneBackward0): add .detach() so it "
                "does not require grad."
            ],
        ),
        (
            lambda w: w.detach().clone().requires_grad_(),
            ["the snapshot requires grad: a record of values should not; use .detach()."],
        ),
        (lambda w: w.detach(), [SHARES_W]),
        (
            lambda w: w.detach().clone() * 0,
            ["the snapshot holds [0.0, 0.0, 0.0], but w holds [1.0, 2.0, 3.0]."],
        ),
    ],
    ids=["placeholder", "shape", "clone", "requires-grad", "detach", "values"],
)
def test_snapshot_messages_in_full(answer, messages):
    assert check_snapshot(answer).messages == messages


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
    assert repr(result) == (
        "✅ Correct: ff1 is a new leaf with its own copy of f1's values; the two-stage backward "
        "gives exactly the joint gradient."
    )


def cut_after_own_backward(f1):
    f1.sum().backward(retain_graph=True)  # x.grad is filled before model 2 runs
    return f1.detach().clone().requires_grad_()


def cut_with_doubling_hook(f1):
    ff1 = f1.detach().clone().requires_grad_()
    ff1.register_hook(lambda grad: 2 * grad)  # the gradient handed back is twice too big
    return ff1


@pytest.mark.parametrize(
    ("answer", "messages"),
    [
        (
            placeholder,
            ["cut(f1) still returns `...`: replace the `...` with an expression built from f1."],
        ),
        (lambda f1: 1 / 0, ["cut(f1) raised ZeroDivisionError: division by zero"]),
        (
            lambda f1: f1.clone().detach(),
            [
                "ff1.requires_grad is False, so ff1.grad will stay None: did you call "
                "requires_grad_() on the cut?"
            ],
        ),
        (
            lambda f1: f1.clone().requires_grad_(True),
            [
                "ff1 is still connected to f1's graph (grad_fn CloneBackward0): add .detach(), or "
                "backward from model 2 runs straight into model 1."
            ],
        ),
        (
            lambda f1: f1.detach().requires_grad_(True),
            [
                "ff1 shares memory with f1 (detach() copies nothing): in one process, an in-place "
                "edit on one side would change the other. Add .clone(), so the hand-off is a copy "
                "(over a wire the receiver gets a copy anyway)."
            ],
        ),
        (cut_after_own_backward, ["backward from model 2 reached x: ff1 is not a real cut."]),
        (
            cut_with_doubling_hook,
            ["the two-stage backward does not give the joint gradient for x."],
        ),
    ],
    ids=["placeholder", "raises", "no-flag", "no-detach", "no-clone", "own-backward", "hook"],
)
def test_cut_messages_in_full(answer, messages):
    assert check_cut(answer).messages == messages


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
    (warned,) = check_cut(lambda f1: torch.tensor(f1).requires_grad_()).messages
    assert warned.startswith("PyTorch warned: To copy construct from a tensor")
    assert check_cut(42).messages == ["pass the function itself: check_cut(cut), not an int."]


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
    assert repr(result) == (
        "✅ Correct: w changed in place, is still a leaf, and its version counter moved "
        "(autograd can see the update)."
    )


def sgd_placeholder(w, lr): ...


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


def sgd_third(w, lr):
    with torch.no_grad():
        w -= lr * w.grad / 3


def sgd_unflags(w, lr):
    w.requires_grad_(False)
    w -= lr * w.grad


def sgd_raises(w, lr):
    raise ValueError("boom")


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


@pytest.mark.parametrize(
    ("answer", "messages"),
    [
        (
            sgd_placeholder,
            [
                "w did not change: update it in place (`w -= ...` or `w.sub_(...)` inside "
                "`with torch.no_grad():`). `w = w - ...` only rebinds the local name."
            ],
        ),
        (
            sgd_no_no_grad,
            [
                "an in-place update of a leaf that requires grad raises unless it runs inside "
                "`with torch.no_grad():`."
            ],
        ),
        (sgd_raises, ["sgd_update(w, lr) raised ValueError: boom"]),
        (sgd_unflags, ["w is no longer a leaf that requires grad: update its values only."]),
        (sgd_plus, ["w moved up the gradient: subtract lr * w.grad, don't add it."]),
        (
            sgd_third,  # values shown to 4 decimals
            ["w holds [0.8333, 1.6667, 2.5], expected [0.5, 1.0, 1.5] (w - lr * w.grad)."],
        ),
        (
            sgd_data,
            [
                "w's version counter did not move, so autograd cannot see the update: that is "
                "what .data does. Use `with torch.no_grad(): w -= lr * w.grad` instead."
            ],
        ),
    ],
    ids=["placeholder", "no-no-grad", "raises", "unflags", "plus", "third", "data"],
)
def test_sgd_messages_in_full(answer, messages):
    assert check_sgd_update(answer).messages == messages


def test_sgd_warnings_are_reported():
    def warns(w, lr):
        warnings.warn("careful", stacklevel=1)
        sgd_no_grad(w, lr)

    assert check_sgd_update(warns).messages == ["PyTorch warned: careful"]
    assert check_sgd_update(42).messages == [
        "pass the function itself: check_sgd_update(sgd_update), not an int."
    ]


@pytest.mark.parametrize(
    ("check", "answer", "message"),
    [
        (
            check_snapshot,
            lambda w: None,
            "take_snapshot(w) returned None: did you forget `return`?",
        ),
        (check_snapshot, lambda w: w.tolist(), "take_snapshot(w) returned a list, not a tensor."),
        (
            check_snapshot,
            lambda w: w,
            "take_snapshot(w) returned w itself: a snapshot must be a new tensor.",
        ),
        (check_cut, lambda f1: f1, "cut(f1) returned f1 itself: nothing was cut."),
        (
            check_cut,
            lambda f1: (f1 * 2).detach().requires_grad_(True),
            "ff1 holds [2.0, 8.0, 18.0], but f1 holds [1.0, 4.0, 9.0].",
        ),
    ],
    ids=["snapshot-none", "snapshot-list", "snapshot-itself", "cut-itself", "cut-values"],
)
def test_messages_name_the_function_and_show_both_values(check, answer, message):
    assert check(answer).messages == [message]
