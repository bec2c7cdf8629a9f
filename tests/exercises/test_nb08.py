"""helpers.exercises.nb08: right answers pass, typical wrong answers get a specific hint."""

import warnings

import pytest
import torch
from torch import nn

from helpers.checks import CheckResult
from helpers.exercises.nb08 import check_freeze_middle, check_real_leaf, check_train


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
        (
            lambda v: torch.tensor(torch.tensor(v, dtype=torch.float64) * 0.01).requires_grad_(),
            "PyTorch warned: To copy construct from a tensor",
        ),
    ],
    ids=[
        "placeholder",
        "none",
        "list",
        "to-then-scale",
        "double",
        "no-requires-grad",
        "float32",
        "unscaled",
        "shape",
        "copy-construct",
    ],
)
def test_real_leaf_wrong_answers_say_what_is_wrong(answer, hint):
    only_hint(check_real_leaf(answer), hint)


def test_real_leaf_reports_errors_and_bad_input():
    assert check_real_leaf(lambda v: 1 / 0).messages == [
        "make_weight(values) raised ZeroDivisionError: division by zero"
    ]
    assert check_real_leaf(42).messages == [
        "pass the function itself: check_real_leaf(make_weight), not an int."
    ]


def test_real_leaf_messages_in_full():
    assert repr(check_real_leaf(leaf_no_grad)) == (
        "✅ Correct: a float64 leaf that requires grad; an optimizer accepts it, and one step "
        "moves it."
    )
    non_leaf = check_real_leaf(lambda v: torch.tensor(v, requires_grad=True).double() * 0.01)
    assert non_leaf.messages == [
        "w is not a leaf: it is the result of an operation (grad_fn MulBackward0), so backward "
        "fills the .grad of the tensor before that step, not w's, and an optimizer refuses w "
        '("can\'t optimize a non-leaf Tensor"). Give the dtype when you create the tensor and '
        "scale it first, then call requires_grad_() (or scale it under torch.no_grad())."
    ]
    no_grad = check_real_leaf(lambda v: torch.tensor(v, dtype=torch.float64) * 0.01)
    assert no_grad.messages == [
        "w does not require grad, so backward gives it no gradient: call .requires_grad_() on it "
        "last, or wrap it in nn.Parameter(...)."
    ]


def test_real_leaf_values_count_to_six_decimals():
    def off_by(delta):
        return lambda v: (torch.tensor(v, dtype=torch.float64) * 0.01 + delta).requires_grad_()

    assert check_real_leaf(off_by(3e-7)).ok
    assert check_real_leaf(off_by(3e-6)).messages == [
        "w holds [0.010003, -0.019997, 0.040003], expected [0.01, -0.02, 0.04] (values * 0.01)."
    ]


def test_real_leaf_that_does_not_move_is_reported():
    def zero_gradient(values):
        w = (torch.tensor(values, dtype=torch.float64) * 0.01).requires_grad_()
        w.register_hook(torch.zeros_like)  # every gradient it gets becomes zero
        return w

    assert check_real_leaf(zero_gradient).messages == ["one SGD step did not move w."]


def warns_twice_over(func):
    """func, after a warning of two lines: only the first line is reported."""

    def wrapped(*args):
        warnings.warn("first line\nsecond line", stacklevel=1)
        return func(*args)

    return wrapped


@pytest.mark.parametrize(
    ("check", "answer"),
    [
        (check_real_leaf, leaf_no_grad),
        (check_freeze_middle, lambda m: m.middle.requires_grad_(False)),
    ],
    ids=["real-leaf", "freeze-middle"],
)
def test_warnings_are_reported_by_their_first_line(check, answer):
    assert check(warns_twice_over(answer)).messages == ["PyTorch warned: first line"]


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


def test_train_success_names_the_first_and_last_loss():
    assert repr(check_train(train_right)) == (
        "✅ Correct: every parameter moved, and the loss fell from 0.1328 to 0.0006995."
    )


def test_train_the_last_loss_counts_not_the_second():
    def up_at_the_end(model, x, target):
        train_right(model, x, target)
        return [2.0, 1.0, 3.0]

    assert check_train(up_at_the_end).messages == [
        "the loss did not fall: 2 at the first step, 3 at the last."
    ]


def test_train_warnings_are_reported_by_their_first_line():
    assert check_train(warns_twice_over(train_right)).messages == ["PyTorch warned: first line"]


def test_train_no_steps_at_all():
    assert check_train(lambda model, x, target: []).messages == [
        "no parameter got a gradient: the loss has no graph behind it. Look for detach(), "
        ".data, torch.tensor(...), .item(), or a torch.no_grad() block around the forward pass; "
        "loss.requires_grad = True only hides this.",
        "train(model, x, target) returned 0 loss(es): take at least two steps.",
    ]


NO_GRAPH_ERROR = (
    "train(model, x, target) raised RuntimeError: element 0 of tensors does not require grad "
    "and does not have a grad_fn. The loss has no graph behind it: find what cut it (detach(), "
    ".data, torch.tensor(...), .item(), or a torch.no_grad() block); setting "
    "loss.requires_grad = True hides the error but trains nothing."
)


def test_train_error_without_a_graph_is_explained():
    def dotted(model, x, target):  # the same error, as a torch release that ends it with "."
        raise RuntimeError(
            "element 0 of tensors does not require grad and does not have a grad_fn."
        )

    assert check_train(train_no_grad).messages == [NO_GRAPH_ERROR]
    assert check_train(dotted).messages == [NO_GRAPH_ERROR]


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
    assert result.messages == [
        "no gradient reached first.weight, first.bias: the graph is cut between the loss and "
        "them. Look for detach(), .data, torch.tensor(...), .item(), or a torch.no_grad() block "
        "in the forward pass.",
        "middle.weight, middle.bias, last.weight, last.bias got a gradient but did not move: the "
        "optimizer does not hold them. Build it from model.parameters() of the model you train.",
        "the loss did not fall: 0.1328 at the first step, 0.1328 at the last.",
    ]


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
    assert check_train("train").messages == [
        "pass the function itself: check_train(train), not a str."
    ]


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
    assert repr(result) == (
        "✅ Correct: middle is frozen (no gradient, no change); first and last still learn, "
        "because the gradient flows through the frozen layer."
    )


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


def removes_middle(model):
    model.middle = None


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            freeze_everything,
            "every parameter is frozen, so nothing can learn: freeze only model.middle.",
        ),
        (
            lambda m: m.middle.eval(),
            "middle.weight, middle.bias still moved: eval() switches dropout and batch norm to "
            "evaluation, it does not stop gradients. Use model.middle.requires_grad_(False).",
        ),
        (
            freeze_weight_only,
            "middle.bias still moved: every parameter of model.middle needs requires_grad=False "
            "(model.middle.requires_grad_(False) sets them all).",
        ),
        (
            freeze_first_and_middle,
            "first.weight, first.bias did not move: freeze only the middle layer. A frozen layer "
            "still passes the gradient through to the layers before it.",
        ),
        (
            lambda m: m.middle.weight.add_(1),
            "freeze_middle(model) raised RuntimeError: a leaf Variable that requires grad is "
            "being used in an in-place operation.",
        ),
        (
            removes_middle,
            "after freeze_middle(model), a training step failed: it raised TypeError: "
            "'NoneType' object is not callable",
        ),
        (3, "pass the function itself: check_freeze_middle(freeze_middle), not an int."),
    ],
    ids=["everything", "eval", "weight-only", "first-too", "in-place", "broken", "not-callable"],
)
def test_freeze_messages_in_full(answer, message):
    assert check_freeze_middle(answer).messages == [message]


@pytest.mark.parametrize(
    ("check", "answer", "message"),
    [
        (
            check_real_leaf,
            lambda v: ...,
            "make_weight(values) still returns `...`: replace the `...` with your tensor.",
        ),
        (check_real_leaf, lambda v: [1.0], "make_weight(values) returned a list, not a tensor."),
        (
            check_real_leaf,
            lambda v: (torch.tensor(v) * 0.01).requires_grad_(),
            "w is torch.float32, not torch.float64: pass dtype=torch.float64 when you create it.",
        ),
        (
            check_real_leaf,
            lambda v: torch.zeros(2, dtype=torch.float64, requires_grad=True),
            "w has shape [2], expected [3].",
        ),
        (
            check_train,
            lambda model, x, target: ...,
            "train(model, x, target) still returns `...`: return the list of losses.",
        ),
        (
            check_train,
            lambda model, x, target: 3,
            "train(model, x, target) should return the list of losses, one float per step "
            "(loss.item()); it returned int.",
        ),
    ],
    ids=["leaf-unfilled", "leaf-list", "leaf-dtype", "leaf-shape", "train-unfilled", "train-int"],
)
def test_messages_name_the_call_and_what_it_returned(check, answer, message):
    assert check(answer).messages == [message]


def train_float_losses(model, x, target, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0625)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = mse(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))  # right too: torch may warn, once per process
    return losses


def test_train_float_of_the_loss_is_right_every_time():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, again = check_train(train_float_losses), check_train(train_float_losses)
    assert first.ok and again.ok, (first, again)


def test_train_float_warning_is_not_held_against_the_learner():
    """torch >= 2.12 warns about float() of a tensor that requires grad, once per process: a
    checker that heeded it would pass the same cell only the second time it runs."""

    def warns_like_torch(model, x, target):
        warnings.warn(
            "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
            "behavior.\nConsider using tensor.detach() first.",
            UserWarning,
            stacklevel=1,
        )
        return train_float_losses(model, x, target)

    assert check_train(warns_like_torch).ok


def train_zero_grad_between(model, x, target, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0625)
    losses = []
    for _ in range(steps):
        loss = mse(model(x), target)
        loss.backward()
        optimizer.zero_grad()  # clears what backward() just computed
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_without_zero_grad(model, x, target, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0625)
    losses = []
    for _ in range(steps):
        loss = mse(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


ALL_SIX = "first.weight, first.bias, middle.weight, middle.bias, last.weight, last.bias"


def test_train_zero_grad_between_backward_and_step_is_named():
    assert check_train(train_zero_grad_between).messages == [
        f"{ALL_SIX} got a gradient, but it was cleared before step() used it: zero_grad() runs "
        "between backward() and step(). Call it before backward() (or after step()).",
        "the loss did not fall: 0.1328 at the first step, 0.1328 at the last.",
    ]


def test_train_without_zero_grad_is_named_not_a_generic_loss_message():
    assert check_train(train_without_zero_grad).messages == [
        f"{ALL_SIX} moved by old gradients too: each backward() added to the gradient the last "
        "step had already used, because zero_grad() is missing. Call optimizer.zero_grad() in "
        "each step, before backward()."
    ]
