"""Checkers of notebook 05: right answers pass, typical wrong answers get a specific message."""

import pytest
import torch
from torch import nn

from helpers.exercises.nb05 import check_kept_alive, check_one_backward
from tests.exercises.common import text
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)


class PostNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.linear = nn.Linear(2, 2)

    def forward(self, x):
        return self.linear(self.conv(x).view(x.size(0), -1))


def make_net() -> PostNet:
    net = PostNet()
    with torch.no_grad():
        net.conv.weight.fill_(1.0)
        net.conv.bias.zero_()
        net.linear.weight.copy_(torch.tensor([[0.5, 0.0], [0.0, -0.25]]))
        net.linear.bias.zero_()
    return net


X = torch.tensor([[[[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]]])
LABELS = torch.tensor([[1.0, 0.0]])


def make_mlp(width: int, depth: int) -> nn.Sequential:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])


def one(fn):
    return check_one_backward(fn, make_net, X, LABELS)


# check_one_backward


def test_one_backward_on_the_sum_passes():
    result = one(lambda loss, z: (loss + z).backward())
    assert result.ok, result
    assert repr(result) == (
        "✅ One backward pass through the shared layers, and their saved tensors are freed."
    )


RETAINED = (
    "after your code the graph still holds {} bytes of saved tensors: drop retain_graph=True, "
    "one backward() does not need it"
)


def two_calls(loss, z):
    loss.backward(retain_graph=True)
    z.backward()


def raises_without_a_message(loss, z):
    raise ValueError()


@pytest.mark.parametrize(
    ("fn", "messages"),
    [
        (
            lambda loss, z: None,
            [
                "no parameter has a .grad yet: call backward() once, on loss + z (still a `...` in "
                "the cell?)"
            ],
        ),
        (
            two_calls,
            [
                "backward ran through the shared layers 2 times (their saved tensors were read "
                "that often): add the losses and call backward() once",
                RETAINED.format(16),
            ],
        ),
        (
            lambda loss, z: loss.backward(),
            ["the gradients are those of loss alone: z is missing from the sum"],
        ),
        (
            lambda loss, z: z.backward(),  # loss never ran backward: its saved tensors stay
            [
                "the gradients are those of z alone: loss is missing from the sum",
                RETAINED.format(16),
            ],
        ),
        (lambda loss, z: (loss + z).backward(retain_graph=True), [RETAINED.format(148)]),
        (
            lambda loss, z: (loss + 2 * z).backward(),
            [
                "net.conv.weight.grad differs from the gradient of loss + z: call backward() once, "
                "on the sum"
            ],
        ),
        (
            lambda loss, z: (loss + 1.01 * z).backward(),
            [
                "net.conv.weight.grad differs from the gradient of loss + z: call backward() once, "
                "on the sum"
            ],
        ),
        (raises_without_a_message, ["your function raised ValueError: "]),
    ],
    ids=[
        "placeholder",
        "two-calls",
        "loss-only",
        "z-only",
        "retain-graph",
        "weights",
        "weights-1%",
        "error",
    ],
)
def test_one_backward_messages_in_full(fn, messages):
    assert one(fn).messages == messages


def test_second_backward_error_gets_the_hint():
    def two_calls_without_retain_graph(loss, z):
        loss.backward()
        z.backward()

    (message,) = one(two_calls_without_retain_graph).messages
    assert message.startswith(
        "your function raised RuntimeError: Trying to backward through the graph a second time"
    )
    assert message.endswith(
        " (the second backward() met saved tensors the first one freed: add the two losses and "
        "call backward() once)"
    )


def test_parameters_the_backward_did_not_reach_are_named():
    def linear_weight_only(loss, z):
        total = loss + z
        leaves, stack = {}, [total.grad_fn]
        while stack:
            node = stack.pop()
            if node is not None:
                if hasattr(node, "variable"):
                    leaves[id(node.variable)] = node.variable
                stack += [child for child, _ in node.next_functions]
        (weight,) = [t for t in leaves.values() if t.shape == (2, 2)]
        total.backward(inputs=[weight])

    assert one(linear_weight_only).messages == [
        f"net.{name}.grad is None: did backward() start from loss + z?"
        for name in ("conv.weight", "conv.bias", "linear.bias")
    ]


def test_placeholder_is_not_yet_and_does_not_raise():
    def placeholder(loss, z): ...  # your code here

    result = one(placeholder)
    assert not result.ok and "no parameter has a .grad yet" in text(result)


def test_retain_graph_and_two_calls_is_caught():
    def two_calls(loss, z):
        loss.backward(retain_graph=True)
        z.backward()

    result = one(two_calls)
    assert not result.ok
    assert "shared layers 2 times" in text(result)
    assert "still holds" in text(result)  # MseLossBackward0's saved tensors were retained


def test_two_calls_without_retain_graph_explains_the_error():
    def two_calls(loss, z):
        loss.backward()
        z.backward()

    result = one(two_calls)
    assert not result.ok
    assert "RuntimeError" in text(result) and "add the two losses" in text(result)


def test_one_loss_only_says_which_is_missing():
    assert "z is missing" in text(one(lambda loss, z: loss.backward()))
    assert "loss is missing" in text(one(lambda loss, z: z.backward()))


def test_retain_graph_on_a_single_backward_is_caught():
    result = one(lambda loss, z: (loss + z).backward(retain_graph=True))
    assert not result.ok and "drop retain_graph=True" in text(result)


def test_wrong_weights_are_named():
    result = one(lambda loss, z: (loss + 2 * z).backward())
    assert not result.ok and "differs from the gradient of loss + z" in text(result)


def test_learner_error_is_reported_not_raised():
    def broken(loss, z):
        raise ValueError("oops")

    result = one(broken)
    assert result.messages == ["your function raised ValueError: oops"]


def test_broken_inputs_do_not_raise():
    result = check_one_backward(lambda loss, z: None, make_net, torch.ones(3), LABELS)
    assert result.messages == [
        "could not run the check: RuntimeError: Expected 3D (unbatched) or 4D (batched) input "
        "to conv2d, but got input of size: [3]"
    ]


# check_kept_alive


HINTS = {
    "elements": "that is the number of elements; a float32 element takes 4 bytes",
    "twice": "twice too much: a ReLU output is saved by ReluBackward0 and by the next "
    "AddmmBackward0, but it is one storage (count it once), and the Linear output before the "
    "ReLU is not saved at all",
    "input": "the input x is held by you anyway: count only what the graph alone keeps alive",
    "short": "one activation short: the last ReLU output is saved too, by its ReluBackward0",
    "params": "parameters are held by the model anyway: count only what the graph alone keeps "
    "alive",
    "other": "look at the table in section 8: which saved tensors are held by the graph only?",
}


@pytest.mark.parametrize(
    ("formula", "hint"),
    [
        (lambda b, w, d: d * b * w, "elements"),
        (lambda b, w, d: 2 * d * b * w * 4, "twice"),
        (lambda b, w, d: (2 * d - 1) * b * w * 4, "twice"),  # Linear inputs and ReLU outputs
        (lambda b, w, d: (d + 1) * b * w * 4, "input"),
        (lambda b, w, d: (d - 1) * b * w * 4, "short"),
        (lambda b, w, d: d * (b * w + w * w + w) * 4, "params"),  # weights and biases
        (lambda b, w, d: d * (b * w + w * w) * 4, "params"),  # weights
        (lambda b, w, d: (d * b * w + (d - 1) * w * w) * 4, "params"),  # inner weights
        (lambda b, w, d: ((d + 1) * b * w + d * (w * w + w)) * 4, "params"),  # x and all
        (lambda b, w, d: ((d + 1) * b * w + (d - 1) * w * w) * 4, "params"),  # x, inner
        (lambda b, w, d: 3 * d * b * w * 4, "other"),
    ],
)
def test_each_typical_wrong_formula_gets_its_hint(formula, hint):
    (message,) = check_kept_alive(formula, make_mlp).messages
    assert message.endswith(" bytes alive: " + HINTS[hint])


@pytest.mark.parametrize(
    ("formula", "hint"),
    [
        (lambda b, w, d: 2 * d * b * w, "twice"),
        (lambda b, w, d: (d + 1) * b * w, "input"),
        (lambda b, w, d: d * (b * w + w * w), "params"),
    ],
)
def test_a_mistake_counted_in_elements_gets_both_hints(formula, hint):
    (message,) = check_kept_alive(formula, make_mlp).messages
    assert message.endswith(
        " bytes alive: it counts elements, and a float32 element takes 4 bytes; and " + HINTS[hint]
    )


def test_the_first_wrong_size_is_named():
    assert check_kept_alive(lambda b, w, d: d * b * w, make_mlp).messages == [
        "kept_alive(2, 3, 1) = 6, but that graph keeps 24 bytes alive: " + HINTS["elements"]
    ]


@pytest.mark.parametrize(
    ("value", "shown"), [(True, "bool"), ("24", "str"), (torch.ones(2), "Tensor")]
)
def test_an_answer_that_is_not_a_number_is_named(value, shown):
    assert check_kept_alive(lambda b, w, d: value, make_mlp).messages == [
        f"kept_alive(2, 3, 1) returned {shown}, not a number of bytes: replace the ... with a "
        "formula"
    ]


def test_right_formula_passes():
    result = check_kept_alive(lambda b, w, d: d * b * w * 4, make_mlp)
    assert result.ok, result
    assert repr(result) == (
        "✅ Right: one float32 (batch, width) activation per block, each storage once."
    )


def test_a_tensor_answer_is_accepted():
    result = check_kept_alive(lambda b, w, d: torch.tensor(d * b * w * 4), make_mlp)
    assert result.ok, result


def test_ellipsis_is_not_yet():
    result = check_kept_alive(lambda b, w, d: ..., make_mlp)
    assert result.messages == [
        "kept_alive(2, 3, 1) returned ..., not a number of bytes: replace the ... with a formula"
    ]


def test_elements_instead_of_bytes():
    result = check_kept_alive(lambda b, w, d: d * b * w, make_mlp)
    assert not result.ok and "4 bytes" in text(result)


def test_counting_shared_storage_twice():
    result = check_kept_alive(lambda b, w, d: 2 * d * b * w * 4, make_mlp)
    assert not result.ok and "twice too much" in text(result)


def test_counting_the_input():
    result = check_kept_alive(lambda b, w, d: (d + 1) * b * w * 4, make_mlp)
    assert not result.ok and "the input x is held by you" in text(result)


def test_counting_the_parameters():
    result = check_kept_alive(lambda b, w, d: d * (b * w + w * w + w) * 4, make_mlp)
    assert not result.ok and "parameters" in text(result)


def test_a_constant_gets_the_measured_value():
    result = check_kept_alive(lambda b, w, d: 24, make_mlp)
    assert not result.ok and "kept_alive(4, 5, 2) = 24, but that graph keeps 160" in text(result)


def test_a_long_error_is_cut_to_160_characters():
    def raises_at_length(b, w, d):
        raise ValueError("x" * 200)

    assert check_kept_alive(raises_at_length, make_mlp).messages == [
        "kept_alive(2, 3, 1) raised ValueError: " + "x" * 160
    ]


def test_raising_formula_is_reported():
    result = check_kept_alive(lambda b, w, d: 1 / 0, make_mlp)
    assert result.messages == ["kept_alive(2, 3, 1) raised ZeroDivisionError: division by zero"]


def test_broken_builder_is_reported():
    result = check_kept_alive(lambda b, w, d: d * b * w * 4, lambda w, d: None)
    assert result.messages == [
        "could not measure make_mlp(3, 1): AttributeError: 'NoneType' object has no attribute "
        "'named_parameters'"
    ]


def test_checkers_leave_the_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    one(lambda loss, z: (loss + z).backward())
    check_kept_alive(lambda b, w, d: d * b * w * 4, make_mlp)
    assert torch.equal(torch.rand(3), expected)
