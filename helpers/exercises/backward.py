"""Exercise checkers for notebook 02 (backward and optimizers): each says what is wrong."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.checks import CheckResult, clean_message, feedback

__all__ = ["check_mean_gradient", "check_sgd_step"]

SGD_LR = 0.5
MEAN_W = [1.0, -2.0, 3.0, 0.5]


def _values(t: torch.Tensor) -> list:
    return t.detach().tolist()


def _sgd_case() -> dict[str, torch.Tensor]:
    """Three parameters with known gradients; `frozen` got no gradient (its .grad is None)."""
    params = {
        "weight": torch.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True),
        "bias": torch.tensor([4.0, -1.0], requires_grad=True),
        "frozen": torch.tensor([7.0], requires_grad=True),
    }
    params["weight"].grad = torch.tensor([[2.0, 4.0], [-2.0, 1.0]])
    params["bias"].grad = torch.tensor([1.0, -6.0])
    return params


def check_sgd_step(sgd_step: Callable[..., object]) -> CheckResult:
    """Check a hand-written SGD step: p <- p - lr * p.grad in place, then p.grad = None."""
    if sgd_step is Ellipsis or not callable(sgd_step):
        return feedback(
            [
                f"sgd_step is {'still `...`' if sgd_step is Ellipsis else type(sgd_step).__name__}"
                ": define a function `def sgd_step(params, lr):` and pass it, without calling it"
            ]
        )
    params = _sgd_case()
    before = {name: p.detach().clone() for name, p in params.items()}
    grads = {name: None if p.grad is None else p.grad.clone() for name, p in params.items()}
    try:
        sgd_step(list(params.values()), SGD_LR)
    except RuntimeError as err:
        if "leaf Variable that requires grad" in str(err):
            return feedback(
                [
                    "autograd refused the in-place update of a parameter (a leaf that requires "
                    "grad): put the update inside `with torch.no_grad():`"
                ]
            )
        return feedback([f"sgd_step raised RuntimeError: {clean_message(str(err))}"])
    except TypeError as err:
        if "NoneType" in str(err):
            return feedback(
                [
                    "sgd_step failed on a parameter whose .grad is None (it got no gradient). "
                    "Skip such parameters, as optimizer.step() does: "
                    "`if p.grad is None: continue`"
                ]
            )
        return feedback([f"sgd_step raised TypeError: {clean_message(str(err))}"])
    except Exception as err:
        return feedback([f"sgd_step raised {type(err).__name__}: {clean_message(str(err))}"])

    moving = ["weight", "bias"]
    if all(torch.equal(params[n].detach(), before[n]) for n in moving):
        return feedback(
            [
                "the parameters did not change. Is the `...` still there? Update each parameter "
                "in place (`p -= lr * p.grad` or `p.sub_(lr * p.grad)`); `p = p - lr * p.grad` "
                "only rebinds a local name and leaves the parameter as it was"
            ]
        )
    problems = []
    for name in moving:
        p, old, grad = params[name], before[name], grads[name]
        now = p.detach()
        if torch.allclose(now, old + SGD_LR * grad):
            problems.append(
                f"{name} moved uphill ({_values(old)} -> {_values(now)}): that is p + lr*grad. "
                "SGD subtracts: p <- p - lr * p.grad"
            )
        elif torch.allclose(now, old - grad):
            problems.append(
                f"{name} moved by the whole gradient: multiply p.grad by lr before subtracting"
            )
        elif not torch.allclose(now, old - SGD_LR * grad):
            problems.append(
                f"{name} is {_values(now)} after the step, but p - lr*p.grad with lr = {SGD_LR} "
                f"is {_values(old - SGD_LR * grad)}"
            )
        if not p.requires_grad:
            problems.append(f"{name} no longer requires grad: update its values, not its flags")
    if not torch.equal(params["frozen"].detach(), before["frozen"]):
        problems.append(
            "a parameter whose .grad was None moved: optimizer.step() skips such parameters"
        )
    if problems:
        return feedback(problems)
    for name, p in params.items():
        if p.grad is None:
            continue
        if torch.count_nonzero(p.grad) == 0:
            problems.append(
                f"{name}.grad is a tensor of zeros; the exercise asks for None (what zero_grad() "
                "does by default): `p.grad = None`"
            )
        else:
            problems.append(
                f"{name}.grad is still set after the step: set `p.grad = None` so the next "
                "backward() does not add onto it"
            )
        break
    return feedback(
        problems,
        success="Your sgd_step does what torch.optim.SGD(params, lr=0.5).step() does, "
        "followed by zero_grad().",
    )


def check_mean_gradient(gradient: object) -> CheckResult:
    """Check the `gradient` that makes `y.backward(gradient)` give the gradient of `y.mean()`."""
    n = len(MEAN_W)
    if gradient is Ellipsis:
        return feedback(
            [f"gradient is still `...`: replace it with a tensor shaped like y ({n} elements)"]
        )
    if gradient is None:
        return feedback(
            [
                f"gradient is None: backward() can only supply it for a scalar, and y has {n} "
                "elements. Pass one value per element of y"
            ]
        )
    if not isinstance(gradient, torch.Tensor):
        return feedback(
            [
                f"gradient is a {type(gradient).__name__}, not a tensor: wrap it, e.g. "
                "torch.tensor([...]), or build it with torch.full_like(y, ...)"
            ]
        )
    if gradient.shape != (n,):
        return feedback(
            [
                f"gradient has shape {list(gradient.shape)} but y has shape [{n}]: backward() "
                "needs exactly one gradient value per element of y"
            ]
        )
    w = torch.tensor(MEAN_W, requires_grad=True)
    y = w * w
    try:
        y.backward(gradient=gradient)
    except Exception as err:
        message = clean_message(str(err))
        return feedback([f"y.backward(gradient) raised {type(err).__name__}: {message}"])
    expected = torch.full((n,), 1.0 / n)
    given = gradient.detach().to(torch.float32)
    if torch.allclose(given, expected) and w.grad is not None:
        return feedback(
            [],
            success=f"w.grad = {_values(w.grad)}, the gradient of y.mean(): each element of y "
            f"counts 1/{n}.",
        )
    if torch.allclose(given, torch.ones(n)):
        return feedback(
            [
                "all ones gives the gradient of y.sum(), not of y.mean(): the mean divides the "
                f"sum by {n}, so each element's weight is 1/{n}"
            ]
        )
    if torch.all(given == given[0]):
        return feedback(
            [
                f"every element has the same weight, good, but it should be 1/{n} = {1 / n}, not "
                f"{given[0].item():g}: d(mean)/d(y_i) = 1/{n}"
            ]
        )
    return feedback(
        [
            f"y.mean() = (y[0] + ... + y[{n - 1}]) / {n} weighs every element the same, so the "
            f"gradient must be {1 / n} in every position; yours is {_values(given)}"
        ]
    )
