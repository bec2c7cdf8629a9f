"""helpers.exercises.leaf_nodes: right answers pass, typical wrong ones get a specific message."""

import pytest
import torch
from torch import nn

from helpers.exercises.leaf_nodes import (
    KINDS,
    check_frozen_conv,
    check_kinds,
    check_leaves_of,
    kind_of,
)


def text(result):
    return "\n".join(result.messages)


# --- kind_of / check_kinds ----------------------------------------------------------------------


@pytest.fixture
def tensors():
    p = nn.Parameter(torch.ones(2))
    q = p.detach()
    r = q * p
    s = torch.ones(2, requires_grad=True) * 1
    u = r.argmax()
    with torch.no_grad():
        v = p * 2
    return {"p": p, "q": q, "r": r, "s": s, "u": u, "v": v}


RIGHT = {
    "p": "leaf, requires grad",
    "q": "leaf, no grad",
    "r": "non-leaf",
    "s": "non-leaf",
    "u": "leaf, no grad",
    "v": "leaf, no grad",
}


def test_kind_of_reads_the_three_kinds(tensors):
    assert {name: kind_of(t) for name, t in tensors.items()} == RIGHT
    assert set(RIGHT.values()) == set(KINDS)


def test_right_predictions_pass(tensors):
    result = check_kinds(RIGHT, **tensors)
    assert result.ok and "6 predictions" in repr(result)


def test_spelling_and_case_are_forgiven(tensors):
    answers = dict(RIGHT, p="Leaf,requires  grad", r="NON-LEAF")
    assert check_kinds(answers, **tensors).ok


def test_placeholders_give_a_friendly_not_yet(tensors):
    result = check_kinds({name: ... for name in tensors}, **tensors)
    assert not result.ok
    assert "replace the `...`" in text(result) and "p, q, r, s, u, v" in text(result)
    assert "'non-leaf'" in text(result)


def test_missing_answer_counts_as_unfilled(tensors):
    answers = {k: v for k, v in RIGHT.items() if k != "u"}
    result = check_kinds(answers, **tensors)
    assert "prediction for: u" in text(result)


def test_operation_result_called_a_leaf_cites_rule_3(tensors):
    result = check_kinds(dict(RIGHT, s="leaf, requires grad"), **tensors)
    assert not result.ok and len(result.messages) == 1
    assert "s: you said 'leaf, requires grad'" in text(result)
    assert "grad_fn=MulBackward0" in text(result) and "rule 3" in text(result)


def test_no_grad_result_called_non_leaf_cites_rule_1(tensors):
    result = check_kinds(dict(RIGHT, v="non-leaf", u="non-leaf"), **tensors)
    assert len(result.messages) == 2
    assert "v is a leaf that does not require grad" in text(result)
    assert "rule 1" in text(result) and "torch.no_grad()" in text(result)
    assert "integer or bool" in text(result)


def test_parameter_called_no_grad_cites_rule_2(tensors):
    result = check_kinds(dict(RIGHT, p="leaf, no grad"), **tensors)
    assert "p is a leaf that requires grad" in text(result) and "rule 2" in text(result)


def test_unknown_label_and_unknown_name_are_reported(tensors):
    result = check_kinds(dict(RIGHT, q="leaf", zz="non-leaf"), **tensors)
    assert "q: 'leaf' is not one of" in text(result)
    assert "no tensor called zz" in text(result)


def test_answers_must_be_a_dict(tensors):
    result = check_kinds(["non-leaf"], **tensors)
    assert not result.ok and "should be a dict" in text(result)


# --- check_frozen_conv ---------------------------------------------------------------------------


class PostNet(nn.Module):
    """The second post's net: Conv2d(1, 2, 3) then Linear(2, 2), hand-set weights."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.linear = nn.Linear(2, 2)
        with torch.no_grad():
            self.conv.weight.fill_(1.0)
            self.conv.bias.fill_(0.0)
            self.linear.weight.copy_(torch.tensor([[0.5, -1.0], [0.25, 2.0]]))
            self.linear.bias.copy_(torch.tensor([0.0, 1.0]))

    def forward(self, x):
        h = self.conv(x)
        return self.linear(h.view(x.size()[0], -1))


@pytest.fixture
def x():
    return torch.arange(9.0).reshape(1, 1, 3, 3) / 8


def test_frozen_conv_right_answer_passes(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    out.sum().backward()
    result = check_frozen_conv(net, out, x)
    assert result.ok, result
    assert net.linear.weight.requires_grad  # the checker changed nothing
    assert torch.equal(net.linear.weight.grad, torch.full((2, 2), 4.5))


def test_frozen_conv_placeholders_give_not_yet(x):
    net = PostNet()
    result = check_frozen_conv(net, ..., x)
    assert not result.ok
    assert "conv.weight, conv.bias still require grad" in text(result)
    assert "out is still `...`" in text(result)


def test_freezing_everything_is_reported(x):
    net = PostNet()
    net.requires_grad_(False)
    result = check_frozen_conv(net, net(x), x)
    assert "linear.weight, linear.bias no longer require grad" in text(result)


def test_output_made_under_no_grad_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    with torch.no_grad():
        out = net(x)
    result = check_frozen_conv(net, out, x)
    assert "out does not require grad" in text(result) and "torch.no_grad()" in text(result)


def test_freezing_after_the_forward_pass_is_reported(x):
    net = PostNet()
    out = net(x)
    net.conv.requires_grad_(False)
    out.sum().backward()
    result = check_frozen_conv(net, out, x)
    assert "still records the convolution (ConvolutionBackward0)" in text(result)


def test_freezing_after_backward_is_reported(x):
    net = PostNet()
    net(x).sum().backward()
    net.conv.requires_grad_(False)
    out = net(x)
    result = check_frozen_conv(net, out, x)
    assert "conv.weight.grad, conv.bias.grad is filled" in text(result)


def test_missing_backward_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    result = check_frozen_conv(net, net(x), x)
    assert "linear.weight.grad, linear.bias.grad is None" in text(result)


def test_backward_twice_is_reported_as_accumulation(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    out.sum().backward(retain_graph=True)
    out.sum().backward()
    result = check_frozen_conv(net, out, x)
    assert "linear.weight.grad is 2 times" in text(result) and "accumulates" in text(result)


def test_backward_from_another_loss_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    (out**2).sum().backward()
    result = check_frozen_conv(net, out, x)
    assert "linear.weight.grad is not d(out.sum())/d(linear.weight)" in text(result)


# --- check_leaves_of -----------------------------------------------------------------------------


def right_leaves_of(t):
    if t.grad_fn is None:
        return [t] if t.requires_grad else []
    found, seen, stack = [], set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            found.append(node.variable)
        stack.extend(child for child, _ in node.next_functions)
    return found


def test_right_walk_passes():
    assert check_leaves_of(right_leaves_of).ok


def test_placeholder_function_gives_not_yet():
    def leaves_of(t): ...

    result = check_leaves_of(leaves_of)
    assert not result.ok and "returned None" in text(result)


def test_not_a_function():
    assert "should be a function" in text(check_leaves_of(...))


def test_forgetting_none_entries_gives_a_hint():
    def leaves_of(t):
        if t.grad_fn is None:
            return [t] if t.requires_grad else []
        found, stack = [], [t.grad_fn]
        while stack:
            node = stack.pop()
            if hasattr(node, "variable"):
                found.append(node.variable)
            stack.extend(child for child, _ in node.next_functions)  # None gets in
        return found

    result = check_leaves_of(leaves_of)
    assert "raised AttributeError" in text(result) and "(None, 0)" in text(result)


def test_no_deduplication_is_reported():
    def leaves_of(t):
        if t.grad_fn is None:
            return [t] if t.requires_grad else []
        found, stack = [], [t.grad_fn]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            if hasattr(node, "variable"):
                found.append(node.variable)
            stack.extend(child for child, _ in node.next_functions)
        return found

    result = check_leaves_of(leaves_of)
    assert "lists w more than once" in text(result) and "visited" in text(result)
    assert "lists a more than once" in text(result)
    assert len(result.messages) == 2  # only the graphs that use a leaf several times


def test_returning_nodes_instead_of_tensors_is_reported():
    def leaves_of(t):
        if t.grad_fn is None:
            return []
        return [n for n, _ in t.grad_fn.next_functions if hasattr(n, "variable")]

    result = check_leaves_of(leaves_of)
    assert "returned backward functions" in text(result) and ".variable" in text(result)


def test_forgetting_a_leaf_root_is_reported():
    def leaves_of(t):
        return [] if t.grad_fn is None else right_leaves_of(t)

    result = check_leaves_of(leaves_of)
    assert result.messages == [
        "on w itself (a leaf that requires grad), leaves_of misses w: it has no grad_fn, but a "
        "leaf that requires grad is its own leaf"
    ]


def test_returning_a_tensor_without_grad_is_reported():
    def leaves_of(t):
        return [t] if t.grad_fn is None else right_leaves_of(t)

    result = check_leaves_of(leaves_of)
    assert "on x itself (requires_grad=False)" in text(result)
    assert "would not fill (x)" in text(result) and "only leaves that require grad" in text(result)


def test_only_the_first_level_is_reported_as_missing_leaves():
    def leaves_of(t):
        if t.grad_fn is None:
            return [t] if t.requires_grad else []
        return [n.variable for n, _ in t.grad_fn.next_functions if hasattr(n, "variable")]

    result = check_leaves_of(leaves_of)
    assert "on y = (w * x).sum(), leaves_of misses w" in text(result)
    assert "misses a, b" in text(result)


def test_wrong_return_type_is_reported():
    result = check_leaves_of(lambda t: {"w": t})
    assert "returned a dict; return a list of tensors" in text(result)
