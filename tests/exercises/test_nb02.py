"""helpers.exercises.nb02: notebook 02's checkers accept right answers, explain wrong ones."""

import pytest
import torch

from helpers.checks import CheckResult
from helpers.exercises.nb02 import MEAN_W, SGD_LR, check_mean_gradient, check_sgd_step

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


def raises_runtime_error(params, lr):
    raise RuntimeError("boom")


def raises_type_error(params, lr):
    raise TypeError("bad")


def turns_flags_off(params, lr):
    right_step(params, lr)
    for p in params:
        p.requires_grad_(False)


def clears_bias_grad_only(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad
    params[0].grad = None  # weight.grad cleared, bias.grad forgotten


def through_data(params, lr):
    for p in params:
        if p.grad is not None:
            p.data -= lr * p.grad  # the right values, behind autograd's back
            p.grad = None


def test_a_step_through_data_is_named():
    result = check_sgd_step(through_data)
    assert not result.ok
    assert "weight moved, but through .data" in str(result)
    assert "with torch.no_grad(): p -= lr * p.grad" in str(result)


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
    assert repr(check_sgd_step(right_step)) == (
        "✅ Your sgd_step does what torch.optim.SGD(params, lr=0.5).step() does, followed by "
        "zero_grad()."
    )


def test_the_parameters_handed_over_are_leaves_one_without_grad():
    seen = []

    def spy(params, lr):
        seen.extend((p.is_leaf, p.requires_grad, p.grad is None) for p in params)
        right_step(params, lr)

    assert check_sgd_step(spy).ok
    assert seen == [(True, True, False), (True, True, False), (True, True, True)]


UNCHANGED = (
    "the parameters did not change. Is the `...` still there? Update each parameter in place "
    "(`p -= lr * p.grad` or `p.sub_(lr * p.grad)`); `p = p - lr * p.grad` only rebinds a local "
    "name and leaves the parameter as it was"
)
UPHILL = "that is p + lr*grad. SGD subtracts: p <- p - lr * p.grad"
STILL_SET = (
    "{}.grad is still set after the step: set `p.grad = None` so the next backward() does not "
    "add onto it"
)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (placeholder, [UNCHANGED]),
        (rebinds, [UNCHANGED]),
        (
            without_no_grad,
            [
                "autograd refused the in-place update of a parameter (a leaf that requires "
                "grad): put the update inside `with torch.no_grad():`"
            ],
        ),
        (
            adds,
            [
                "weight moved uphill ([[1.0, -2.0], [3.0, 0.5]] -> [[2.0, 0.0], [2.0, 1.0]]): "
                + UPHILL,
                "bias moved uphill ([4.0, -1.0] -> [4.5, -4.0]): " + UPHILL,
            ],
        ),
        (
            forgets_lr,
            [
                f"{name} moved by the whole gradient: multiply p.grad by lr before subtracting"
                for name in ("weight", "bias")
            ],
        ),
        (
            wrong_lr,
            [
                "weight is [[0.5, -3.0], [3.5, 0.25]] after the step, but p - lr*p.grad with "
                "lr = 0.5 is [[0.0, -4.0], [4.0, 0.0]]",
                "bias is [3.75, 0.5] after the step, but p - lr*p.grad with lr = 0.5 is [3.5, 2.0]",
            ],
        ),
        (
            does_not_skip_none,
            [
                "sgd_step failed on a parameter whose .grad is None (it got no gradient). Skip "
                "such parameters, as optimizer.step() does: `if p.grad is None: continue`"
            ],
        ),
        (
            turns_flags_off,
            [
                f"{name} no longer requires grad: update its values, not its flags"
                for name in ("weight", "bias")
            ],
        ),
        (keeps_grad, [STILL_SET.format("weight")]),
        (clears_bias_grad_only, [STILL_SET.format("bias")]),
        (
            zeros_grad,
            [
                "weight.grad is a tensor of zeros; the exercise asks for None (what zero_grad() "
                "does by default): `p.grad = None`"
            ],
        ),
        (
            moves_frozen,
            ["a parameter whose .grad was None moved: optimizer.step() skips such parameters"],
        ),
        (raises_other, ["sgd_step raised ValueError: boom"]),
        (raises_runtime_error, ["sgd_step raised RuntimeError: boom"]),
        (raises_type_error, ["sgd_step raised TypeError: bad"]),
    ],
    ids=lambda v: v.__name__ if callable(v) else None,
)
def test_typical_mistakes_get_specific_feedback(step, expected):
    result = check_sgd_step(step)
    assert not result.ok
    assert result.messages == expected


@pytest.mark.parametrize(("value", "shown"), [(..., "still `...`"), (None, "NoneType"), (3, "int")])
def test_not_a_function_is_a_friendly_not_yet(value, shown):
    result = check_sgd_step(value)
    assert result.messages == [
        f"sgd_step is {shown}: define a function `def sgd_step(params, lr):` and pass it, "
        "without calling it"
    ]
    assert repr(result).startswith("❌ Not yet")


# ---- check_mean_gradient --------------------------------------------------------------------

N = len(MEAN_W)


def test_mean_gradient_passes():
    result = check_mean_gradient(torch.full((N,), 1 / N))
    assert result.ok, result
    assert "[0.5, -1.0, 1.5, 0.25]" in result.success
    assert result.success.endswith(f"each element of y counts 1/{N}.")


def test_mean_gradient_accepts_a_gradient_built_from_y():
    w = torch.tensor(MEAN_W, requires_grad=True)
    y = w * w
    assert check_mean_gradient(torch.full_like(y, 1 / y.numel())).ok


@pytest.mark.parametrize(
    ("gradient", "expected"),
    [
        (..., "gradient is still `...`: replace it with a tensor shaped like y (4 elements)"),
        (
            None,
            "gradient is None: backward() can only supply it for a scalar, and y has 4 "
            "elements. Pass one value per element of y",
        ),
        (
            [0.25] * N,
            "gradient is a list, not a tensor: wrap it, e.g. torch.tensor([...]), or build it "
            "with torch.full_like(y, ...)",
        ),
        (
            torch.tensor(0.25),
            "gradient has shape scalar but y has shape [4]: backward() needs exactly one gradient "
            "value per element of y",
        ),
        (
            torch.full((1, N), 0.25),
            "gradient has shape [1, 4] but y has shape [4]: backward() needs exactly one "
            "gradient value per element of y",
        ),
        (
            torch.ones(N),
            "all ones gives the gradient of y.sum(), not of y.mean(): the mean divides the sum "
            "by 4, so each element's weight is 1/4",
        ),
        (
            torch.full((N,), 0.5),
            "every element has the same weight, good, but it should be 1/4 = 0.25, not 0.5: "
            "d(mean)/d(y_i) = 1/4",
        ),
        (
            torch.tensor([0.25, 0.25, 0.25, 0.0]),
            "y.mean() = (y[0] + ... + y[3]) / 4 weighs every element the same, so the gradient "
            "must be 0.25 in every position; yours is [0.25, 0.25, 0.25, 0.0]",
        ),
    ],
    ids=["placeholder", "none", "list", "scalar", "2d", "ones", "half", "uneven"],
)
def test_mean_gradient_mistakes_get_specific_feedback(gradient, expected):
    result = check_mean_gradient(gradient)
    assert result.messages == [expected]


def test_mean_gradient_reports_a_failing_backward_instead_of_raising():
    result = check_mean_gradient(torch.full((N,), 0.25, dtype=torch.complex64))
    assert not result.ok
    assert result.messages[0].startswith("y.backward(gradient) raised RuntimeError: For complex")


def test_mean_gradient_ignores_integer_dtype_and_judges_the_values():
    result = check_mean_gradient(torch.ones(N, dtype=torch.int64))
    assert not result.ok and "gradient of y.sum()" in result.messages[0]
