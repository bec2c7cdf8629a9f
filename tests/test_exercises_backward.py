"""helpers.exercises.backward: notebook 02's checkers accept right answers, explain wrong ones."""

import pytest
import torch

from helpers.checks import CheckResult
from helpers.exercises.backward import MEAN_W, SGD_LR, check_mean_gradient, check_sgd_step

# ---- check_sgd_step -------------------------------------------------------------------------


def right_step(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p -= lr * p.grad
            p.grad = None


def placeholder(params, lr): ...


def without_no_grad(params, lr):
    for p in params:
        if p.grad is not None:
            p -= lr * p.grad


def adds(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p += lr * p.grad
                p.grad = None


def forgets_lr(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= p.grad
                p.grad = None


def does_not_skip_none(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad


def rebinds(params, lr):
    for p in params:
        if p.grad is not None:
            p = p - lr * p.grad  # the mistake under test: rebinds, changes nothing


def keeps_grad(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad


def zeros_grad(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad
                p.grad.zero_()


def wrong_lr(params, lr):
    right_step(params, lr / 2)


def moves_frozen(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                p += 1.0
            else:
                p -= lr * p.grad
                p.grad = None


def raises_other(params, lr):
    raise ValueError("boom")


def test_right_step_passes_and_matches_torch_sgd():
    result = check_sgd_step(right_step)
    assert isinstance(result, CheckResult) and result.ok, result
    # The checker's expectation is what torch.optim.SGD itself does.
    p = torch.tensor([1.0, -2.0], requires_grad=True)
    q = p.detach().clone().requires_grad_()
    p.grad = torch.tensor([2.0, 4.0])
    q.grad = p.grad.clone()
    torch.optim.SGD([p], lr=SGD_LR).step()
    right_step([q], SGD_LR)
    assert torch.equal(p, q)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (placeholder, "did not change. Is the `...` still there?"),
        (rebinds, "only rebinds a local name"),
        (without_no_grad, "with torch.no_grad():"),
        (adds, "moved uphill"),
        (forgets_lr, "multiply p.grad by lr"),
        (wrong_lr, "p - lr*p.grad with lr = 0.5"),
        (does_not_skip_none, "if p.grad is None: continue"),
        (keeps_grad, "still set after the step"),
        (zeros_grad, "a tensor of zeros"),
        (moves_frozen, "whose .grad was None moved"),
        (raises_other, "raised ValueError: boom"),
    ],
)
def test_typical_mistakes_get_specific_feedback(step, expected):
    result = check_sgd_step(step)
    assert not result.ok
    assert any(expected in m for m in result.messages), result.messages


@pytest.mark.parametrize("value", [..., None, 3])
def test_not_a_function_is_a_friendly_not_yet(value):
    result = check_sgd_step(value)
    assert not result.ok and "def sgd_step(params, lr):" in result.messages[0]
    assert repr(result).startswith("❌ Not yet")


# ---- check_mean_gradient --------------------------------------------------------------------

N = len(MEAN_W)


def test_mean_gradient_passes():
    result = check_mean_gradient(torch.full((N,), 1 / N))
    assert result.ok, result
    assert "[0.5, -1.0, 1.5, 0.25]" in result.success


def test_mean_gradient_accepts_a_gradient_built_from_y():
    w = torch.tensor(MEAN_W, requires_grad=True)
    y = w * w
    assert check_mean_gradient(torch.full_like(y, 1 / y.numel())).ok


@pytest.mark.parametrize(
    ("gradient", "expected"),
    [
        (..., "still `...`"),
        (None, "backward() can only supply it for a scalar"),
        ([0.25] * N, "is a list, not a tensor"),
        (torch.tensor(0.25), "shape [] but y has shape [4]"),
        (torch.full((1, N), 0.25), "shape [1, 4]"),
        (torch.ones(N), "gradient of y.sum()"),
        (torch.full((N,), 0.5), "should be 1/4 = 0.25, not 0.5"),
        (torch.tensor([0.25, 0.25, 0.25, 0.0]), "weighs every element the same"),
    ],
)
def test_mean_gradient_mistakes_get_specific_feedback(gradient, expected):
    result = check_mean_gradient(gradient)
    assert not result.ok
    assert any(expected in m for m in result.messages), result.messages


def test_mean_gradient_reports_a_failing_backward_instead_of_raising():
    result = check_mean_gradient(torch.full((N,), 0.25, dtype=torch.complex64))
    assert not result.ok
    assert result.messages[0].startswith("y.backward(gradient) raised RuntimeError")


def test_mean_gradient_ignores_integer_dtype_and_judges_the_values():
    result = check_mean_gradient(torch.ones(N, dtype=torch.int64))
    assert not result.ok and "gradient of y.sum()" in result.messages[0]
