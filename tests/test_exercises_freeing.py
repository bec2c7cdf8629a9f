"""Checkers of notebook 05: right answers pass, typical wrong answers get a specific message."""

import torch
from torch import nn

from helpers.exercises.freeing import check_kept_alive, check_one_backward


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


def text(result) -> str:
    return " ".join(result.messages)


# check_one_backward


def test_one_backward_on_the_sum_passes():
    result = one(lambda loss, z: (loss + z).backward())
    assert result.ok, result


def test_placeholder_is_not_yet_and_does_not_raise():
    def placeholder(loss, z):
        ...  # your code here

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
    assert not result.ok and "ValueError: oops" in text(result)


def test_broken_inputs_do_not_raise():
    result = check_one_backward(lambda loss, z: None, make_net, torch.ones(3), LABELS)
    assert not result.ok and "could not run the check" in text(result)


# check_kept_alive


def test_right_formula_passes():
    result = check_kept_alive(lambda b, w, d: d * b * w * 4, make_mlp)
    assert result.ok, result


def test_a_tensor_answer_is_accepted():
    result = check_kept_alive(lambda b, w, d: torch.tensor(d * b * w * 4), make_mlp)
    assert result.ok, result


def test_ellipsis_is_not_yet():
    result = check_kept_alive(lambda b, w, d: ..., make_mlp)
    assert not result.ok and "returned ..., not a number of bytes" in text(result)


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


def test_raising_formula_is_reported():
    result = check_kept_alive(lambda b, w, d: 1 / 0, make_mlp)
    assert not result.ok and "ZeroDivisionError" in text(result)


def test_broken_builder_is_reported():
    result = check_kept_alive(lambda b, w, d: d * b * w * 4, lambda w, d: None)
    assert not result.ok and "could not measure" in text(result)


def test_checkers_leave_the_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    one(lambda loss, z: (loss + z).backward())
    check_kept_alive(lambda b, w, d: d * b * w * 4, make_mlp)
    assert torch.equal(torch.rand(3), expected)
