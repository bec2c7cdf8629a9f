"""Exercise checkers for notebook 02 (backward and optimizers): each says what is wrong."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.checks import CheckResult, clean_message, feedback
from helpers.language import say
from helpers.shapes import shape_text

__all__ = ["check_mean_gradient", "check_sgd_step"]

#: The text file the learner-facing messages come from (its [feedback] table).
TEXT = "02_backward_and_optimizers"

SGD_LR = 0.5
MEAN_W = [1.0, -2.0, 3.0, 0.5]


def _values(t: torch.Tensor) -> list:
    return t.detach().tolist()


def _raised(error: str, err: BaseException) -> str:
    return say(TEXT, "feedback.sgd_step_raised", error=error, message=clean_message(str(err)))


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
    if sgd_step is Ellipsis:
        return feedback([say(TEXT, "feedback.sgd_step_unfilled")])
    if not callable(sgd_step):
        return feedback([say(TEXT, "feedback.sgd_step_not_callable", type=type(sgd_step).__name__)])
    params = _sgd_case()
    before = {name: p.detach().clone() for name, p in params.items()}
    versions = {name: p._version for name, p in params.items()}
    grads = {name: None if p.grad is None else p.grad.clone() for name, p in params.items()}
    try:
        sgd_step(list(params.values()), SGD_LR)
    except RuntimeError as err:
        if "leaf Variable that requires grad" in str(err):
            return feedback([say(TEXT, "feedback.in_place_refused")])
        return feedback([_raised("RuntimeError", err)])
    except TypeError as err:
        if "NoneType" in str(err):
            return feedback([say(TEXT, "feedback.grad_none_not_skipped")])
        return feedback([_raised("TypeError", err)])
    except Exception as err:
        return feedback([_raised(type(err).__name__, err)])

    moving = ["weight", "bias"]
    if all(torch.equal(params[n].detach(), before[n]) for n in moving):
        return feedback([say(TEXT, "feedback.params_unchanged")])
    problems = []
    for name in moving:
        p, old, grad = params[name], before[name], grads[name]
        now = p.detach()
        if torch.allclose(now, old + SGD_LR * grad):
            problems.append(
                say(TEXT, "feedback.moved_uphill", name=name, old=_values(old), new=_values(now))
            )
        elif torch.allclose(now, old - grad):
            problems.append(say(TEXT, "feedback.whole_gradient", name=name))
        elif not torch.allclose(now, old - SGD_LR * grad):
            problems.append(
                say(
                    TEXT,
                    "feedback.wrong_step",
                    name=name,
                    got=_values(now),
                    lr=SGD_LR,
                    expected=_values(old - SGD_LR * grad),
                )
            )
        if not p.requires_grad:
            problems.append(say(TEXT, "feedback.no_longer_requires_grad", name=name))
        elif p._version == versions[name] and not torch.equal(now, old):
            # moved, and its version counter did not count it: written through .data
            problems.append(say(TEXT, "feedback.through_data", name=name))
    if not torch.equal(params["frozen"].detach(), before["frozen"]):
        problems.append(say(TEXT, "feedback.frozen_moved"))
    if problems:
        return feedback(problems)
    for name, p in params.items():
        if p.grad is None:
            continue
        if torch.count_nonzero(p.grad) == 0:
            problems.append(say(TEXT, "feedback.grad_zeros", name=name))
        else:
            problems.append(say(TEXT, "feedback.grad_still_set", name=name))
        break
    return feedback(problems, success=say(TEXT, "feedback.sgd_step_success", lr=SGD_LR))


def check_mean_gradient(gradient: object) -> CheckResult:
    """Check the `gradient` that makes `y.backward(gradient)` give the gradient of `y.mean()`."""
    n = len(MEAN_W)
    if gradient is Ellipsis:
        return feedback([say(TEXT, "feedback.gradient_unfilled", n=n)])
    if gradient is None:
        return feedback([say(TEXT, "feedback.gradient_none", n=n)])
    if not isinstance(gradient, torch.Tensor):
        return feedback([say(TEXT, "feedback.gradient_not_a_tensor", type=type(gradient).__name__)])
    if gradient.shape != (n,):
        return feedback(
            [say(TEXT, "feedback.gradient_wrong_shape", shape=shape_text(gradient), n=n)]
        )
    w = torch.tensor(MEAN_W, requires_grad=True)
    y = w * w
    try:
        y.backward(gradient=gradient)
    except Exception as err:
        message = clean_message(str(err))
        return feedback(
            [say(TEXT, "feedback.backward_raised", error=type(err).__name__, message=message)]
        )
    expected = torch.full((n,), 1.0 / n)
    given = gradient.detach().to(torch.float32)
    if torch.allclose(given, expected) and w.grad is not None:
        return feedback(
            [], success=say(TEXT, "feedback.mean_gradient_success", grad=_values(w.grad), n=n)
        )
    if torch.allclose(given, torch.ones(n)):
        return feedback([say(TEXT, "feedback.all_ones", n=n)])
    if torch.all(given == given[0]):
        return feedback(
            [say(TEXT, "feedback.same_wrong_weight", n=n, weight=1 / n, got=f"{given[0].item():g}")]
        )
    return feedback(
        [
            say(
                TEXT,
                "feedback.uneven_weights",
                last=n - 1,
                n=n,
                weight=1 / n,
                got=_values(given),
            )
        ]
    )
