"""helpers.exercises.grad_modes: right answers pass, typical wrong answers get a specific hint."""

import pytest
import torch
from torch import nn

from helpers.checks import CheckResult
from helpers.exercises.grad_modes import check_freeze_middle, check_real_leaf, check_train


def only_hint(result: CheckResult, fragment: str) -> None:
    assert not result.ok
    assert any(fragment in m for m in result.messages), result.messages
    assert "Not yet" in repr(result)


# -- make_weight ----------------------------------------------------------------------------------


def leaf_no_grad(values):
    w = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        w *= 0.01
    return w


@pytest.mark.parametrize(
    "answer",
    [
        lambda v: (torch.tensor(v, dtype=torch.float64) * 0.01).requires_grad_(),
        lambda v: nn.Parameter(torch.tensor(v, dtype=torch.float64) * 0.01),
        lambda v: torch.tensor(v, dtype=torch.float64, device="cpu").mul(0.01).requires_grad_(),
        leaf_no_grad,
    ],
    ids=["requires-grad-last", "parameter", "device", "no-grad-scale"],
)
def test_real_leaf_right_answers_pass(answer):
    result = check_real_leaf(answer)
    assert result.ok, result
    assert repr(result).startswith("✅")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda v: ..., "still returns `...`"),
        (lambda v: None, "forget `return`"),
        (lambda v: v, "returned a list"),
        (
            lambda v: torch.tensor(v, requires_grad=True).to(torch.float64) * 0.01,
            "grad_fn MulBackward0",
        ),
        (lambda v: torch.tensor(v, requires_grad=True).double(), "grad_fn ToCopyBackward0"),
        (lambda v: torch.tensor(v, dtype=torch.float64) * 0.01, "does not require grad"),
        (lambda v: (torch.tensor(v) * 0.01).requires_grad_(), "not torch.float64"),
        (lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True), "expected [0.01"),
        (lambda v: torch.zeros(2, dtype=torch.float64, requires_grad=True), "shape [2]"),
        (lambda v: torch.tensor(torch.tensor(v, dtype=torch.float64) * 0.01).requires_grad_(),
         "PyTorch warned: To copy construct from a tensor"),
    ],
    ids=[
        "placeholder", "none", "list", "to-then-scale", "double", "no-requires-grad", "float32",
        "unscaled", "shape", "copy-construct",
    ],
)
def test_real_leaf_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_real_leaf(answer), hint)


def test_real_leaf_reports_errors_and_bad_input():
    only_hint(check_real_leaf(lambda v: v.no_such_method()), "raised AttributeError")
    only_hint(check_real_leaf(42), "pass the function itself")


# -- train ----------------------------------------------------------------------------------------


class ThreeLayers(nn.Module):
    """Another model of the notebook's shape: what a learner's optimizer may wrongly hold."""

    def __init__(self):
        super().__init__()
        self.first, self.middle, self.last = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 1)


def mse(out, target):
    return ((out - target) ** 2).mean()


def train_right(model, x, target, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = mse(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_by_hand(model, x, target):
    losses = []
    for _ in range(2):
        model.zero_grad()
        loss = mse(model(x), target)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.05 * p.grad
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("answer", [train_right, train_by_hand])
def test_train_right_answers_pass(answer):
    result = check_train(answer)
    assert result.ok, result
    assert "every parameter moved" in repr(result)


def train_notebook_bugs(model, x, target, steps=3):
    """The exercise as the notebook hands it out: two bugs."""
    optimizer = torch.optim.SGD(ThreeLayers().parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        h = model.first(x).detach()
        loss = mse(model.last(model.middle(h)), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_train_notebook_version_names_both_bugs():
    result = check_train(train_notebook_bugs)
    text = " ".join(result.messages)
    assert "no gradient reached first.weight, first.bias" in text
    assert "middle.weight, middle.bias, last.weight, last.bias got a gradient but did not move" in (
        text
    )
    assert "the loss did not fall" in text


def train_requires_grad_trick(model, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(2):
        optimizer.zero_grad()
        with torch.no_grad():
            loss = mse(model(x), target)
        loss.requires_grad = True
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_no_grad(model, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torch.no_grad():
        loss = mse(model(x), target)
    loss.backward()
    optimizer.step()
    return [loss.item()]


def train_data_cut(model, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(2):
        optimizer.zero_grad()
        loss = mse(model.last(model.middle(model.first(x)).data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_too_fast(model, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = mse(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_returns_tensors(model, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss = mse(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda model, x, target: ..., "still returns `...`"),
        (train_returns_tensors, "it returned Tensor"),
        (train_requires_grad_trick, "no parameter got a gradient"),
        (train_no_grad, "loss.requires_grad = True hides the error"),
        (train_data_cut, "no gradient reached first.weight, first.bias, middle.weight"),
        (train_too_fast, "the loss did not fall"),
        (lambda model, x, target: train_right(model, x, target, steps=1), "take at least two"),
    ],
    ids=["placeholder", "tensor", "requires-grad-trick", "no-grad", "data", "lr", "one-step"],
)
def test_train_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_train(answer), hint)


def test_train_checker_needs_a_function():
    only_hint(check_train("train"), "pass the function itself")


# -- freeze_middle --------------------------------------------------------------------------------


def freeze_loop(model):
    for p in model.middle.parameters():
        p.requires_grad = False


@pytest.mark.parametrize(
    "answer", [lambda m: m.middle.requires_grad_(False), freeze_loop], ids=["module", "loop"]
)
def test_freeze_right_answers_pass(answer):
    result = check_freeze_middle(answer)
    assert result.ok, result


def freeze_weight_only(model):
    model.middle.weight.requires_grad_(False)


def freeze_everything(model):
    model.requires_grad_(False)


def freeze_first_and_middle(model):
    model.first.requires_grad_(False)
    model.middle.requires_grad_(False)


def freeze_under_no_grad(model):
    with torch.no_grad():
        model.middle(torch.zeros(1, 2))


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda m: ..., "middle.weight, middle.bias still moved: every parameter"),
        (lambda m: m.middle.eval(), "eval() switches dropout and batch norm"),
        (freeze_weight_only, "middle.bias still moved"),
        (freeze_first_and_middle, "first.weight, first.bias did not move"),
        (freeze_everything, "every parameter is frozen"),
        (freeze_under_no_grad, "middle.weight, middle.bias still moved"),
        (lambda m: m.middle.weight.add_(1), "raised RuntimeError"),
    ],
    ids=["placeholder", "eval", "weight-only", "first-too", "everything", "no-grad", "in-place"],
)
def test_freeze_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_freeze_middle(answer), hint)
