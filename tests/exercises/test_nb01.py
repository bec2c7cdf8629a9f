"""helpers.exercises.nb01: right answers pass, typical wrong ones get a specific message."""

import pytest
import torch
from torch import nn

from helpers.exercises.nb01 import (
    KINDS,
    check_frozen_conv,
    check_kinds,
    check_leaves_of,
    kind_of,
)
from tests.exercises.common import text
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)

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
    assert result.messages == [
        "replace the `...` with your prediction for: p, q, r, s, u, v",
        "each answer is one of: 'non-leaf', 'leaf, requires grad', 'leaf, no grad'",
    ]


def test_missing_answer_counts_as_unfilled(tensors):
    answers = {k: v for k, v in RIGHT.items() if k != "u"}
    result = check_kinds(answers, **tensors)
    assert "prediction for: u" in text(result)


def test_operation_result_called_a_leaf_cites_rule_3(tensors):
    result = check_kinds(dict(RIGHT, s="leaf, requires grad"), **tensors)
    assert not result.ok
    assert result.messages == [
        "s: you said 'leaf, requires grad', but s is a non-leaf (grad_fn=MulBackward0): an "
        "operation made it, and one of its inputs requires grad (rule 3)"
    ]


def test_no_grad_result_called_non_leaf_cites_rule_1(tensors):
    result = check_kinds(dict(RIGHT, v="non-leaf", u="non-leaf"), **tensors)
    assert len(result.messages) == 2
    assert result.messages[1] == (
        "v: you said 'non-leaf', but v is a leaf that does not require grad: every tensor with "
        "requires_grad=False is a leaf (rule 1), also one made by an operation under "
        "torch.no_grad(), by detach(), or with an integer or bool result"
    )


def test_parameter_called_no_grad_cites_rule_2(tensors):
    result = check_kinds(dict(RIGHT, p="leaf, no grad"), **tensors)
    assert result.messages == [
        "p: you said 'leaf, no grad', but p is a leaf that requires grad: you created it with "
        "requires_grad=True and no operation made it (rule 2)"
    ]


def test_unknown_label_and_unknown_name_are_reported(tensors):
    result = check_kinds(dict(RIGHT, q="leaf", zz="non-leaf", yy="non-leaf"), **tensors)
    assert result.messages == [
        "q: 'leaf' is not one of 'non-leaf', 'leaf, requires grad', 'leaf, no grad'",
        "no tensor called zz, yy in this exercise",
    ]


def test_answers_must_be_a_dict(tensors):
    result = check_kinds(["non-leaf"], **tensors)
    assert not result.ok
    assert result.messages == ["answers should be a dict of name -> kind, got list"]


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
    assert repr(result) == (
        "✅ Only the linear layer gets .grad, and the convolution is not even recorded."
    )
    assert net.linear.weight.requires_grad  # the checker changed nothing
    assert torch.equal(net.linear.weight.grad, torch.full((2, 2), 4.5))


def test_frozen_conv_placeholders_give_not_yet(x):
    net = PostNet()
    result = check_frozen_conv(net, ..., x)
    assert not result.ok
    assert result.messages == [
        "conv.weight, conv.bias still require grad: switch the flag off with "
        "requires_grad_(False) (parameters are leaves, so you may)",
        "out is still `...`: run the net on x",
    ]


def test_frozen_conv_out_must_be_a_tensor(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    result = check_frozen_conv(net, [net(x)], x)
    assert result.messages == ["out should be the net's output tensor, got list"]


def test_freezing_everything_is_reported(x):
    net = PostNet()
    net.requires_grad_(False)
    result = check_frozen_conv(net, net(x), x)
    assert result.messages == [
        "linear.weight, linear.bias no longer require grad: freeze only the conv layer, the "
        "linear layer must still learn"
    ]


def test_output_made_under_no_grad_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    with torch.no_grad():
        out = net(x)
    result = check_frozen_conv(net, out, x)
    assert result.messages == [
        "out does not require grad, so backward() cannot run from it: was it computed under "
        "torch.no_grad()? Freezing happens per parameter, not per forward pass"
    ]


def test_freezing_after_the_forward_pass_is_reported(x):
    net = PostNet()
    out = net(x)
    net.conv.requires_grad_(False)
    out.sum().backward()
    result = check_frozen_conv(net, out, x)
    assert result.messages == [
        "out's graph still records the convolution (ConvolutionBackward0): the conv layer was "
        "frozen after the forward pass. Freeze first, then run the net"
    ]


def test_the_convolution_is_found_below_an_input_without_grad(x):
    net = PostNet()
    out = net(x) * torch.tensor(2.0)  # MulBackward0 lists (None, 0) for the constant first
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
    assert result.messages == [
        "conv.weight.grad, conv.bias.grad is filled: backward() ran before the layer was "
        "frozen. Start again from a fresh net and freeze first"
    ]


def test_missing_backward_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    result = check_frozen_conv(net, net(x), x)
    assert result.messages == [
        "linear.weight.grad, linear.bias.grad is None: call backward() on out.sum()"
    ]


def test_backward_twice_is_reported_as_accumulation(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    out.sum().backward(retain_graph=True)
    out.sum().backward()
    result = check_frozen_conv(net, out, x)
    assert result.messages == [  # bias.grad is 2 * ones: the factor is read off any layout
        f"linear.{name}.grad is 2 times d(out.sum())/d(linear.{name}): .grad accumulates, so "
        "backward() ran 2 times. Start again from a fresh net and run it once"
        for name in ("weight", "bias")
    ]


def test_backward_three_times_is_counted(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    for _ in range(3):
        out.sum().backward(retain_graph=True)
    result = check_frozen_conv(net, out, x)
    assert "linear.weight.grad is 3 times" in text(result) and "ran 3 times" in text(result)


def test_a_gradient_that_is_not_a_multiple_is_not_called_accumulated(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    out.sum().backward()
    with torch.no_grad():
        net.linear.weight.grad[0, 0] += 4.5  # 2x in one place only
    result = check_frozen_conv(net, out, x)
    assert result.messages == [
        "linear.weight.grad is not d(out.sum())/d(linear.weight): call backward() on out.sum()"
    ]


def test_backward_from_another_loss_is_reported(x):
    net = PostNet()
    net.conv.requires_grad_(False)
    out = net(x)
    (out**2).sum().backward()
    result = check_frozen_conv(net, out, x)
    assert result.messages == [
        f"linear.{name}.grad is not d(out.sum())/d(linear.{name}): call backward() on out.sum()"
        for name in ("weight", "bias")
    ]


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
    result = check_leaves_of(right_leaves_of)
    assert result.ok
    assert repr(result) == "✅ leaves_of finds every leaf backward() fills, once each."


def test_the_graphs_are_the_ones_the_messages_describe():
    roots = []

    def spy(t):
        roots.append(t)
        raise ValueError("spy")

    described = [m.split(", leaves_of raised")[0] for m in check_leaves_of(spy).messages]
    w, a, b, x = (torch.tensor(v) for v in ([0.5, -1.0], [2.0, 3.0], [1.0, 4.0], [1.0, 2.0]))
    expected = {  # description -> (the value it promises, does it require grad)
        "on y = (w * x).sum()": ((w * x).sum(), True),
        "on y = w * w + w (w used three times)": (w * w + w, True),
        "on y = (a * b + a * x).sum()": ((a * b + a * x).sum(), True),
        "on w itself (a leaf that requires grad)": (w, True),
        "on x itself (requires_grad=False)": (x, False),
        "on y = w.detach() * 2 (no graph at all)": (w * 2, False),
    }
    assert described == list(expected)
    for root, (value, requires_grad) in zip(roots, expected.values(), strict=True):
        assert torch.equal(root.detach(), value) and root.requires_grad == requires_grad


def test_an_error_is_reported_for_every_graph():
    result = check_leaves_of(lambda t: 1 / 0)
    assert len(result.messages) == 6
    assert result.messages[0] == (
        "on y = (w * x).sum(), leaves_of raised ZeroDivisionError: division by zero"
    )


def test_placeholder_function_gives_not_yet():
    def leaves_of(t): ...

    result = check_leaves_of(leaves_of)
    assert not result.ok and "returned None" in text(result)


def test_not_a_function():
    assert check_leaves_of(...).messages == ["leaves_of should be a function, got ellipsis"]


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
    assert result.messages[0] == (
        "on y = (w * x).sum(), leaves_of raised AttributeError: 'NoneType' object has no "
        "attribute 'next_functions'. Hint: an entry of next_functions is (None, 0) for an input "
        "that does not require grad; skip it"
    )


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
    assert result.messages == [  # only the graphs that use a leaf several times
        f"on {what}, leaves_of lists {leaf} more than once: a leaf used several times is still "
        "one tensor; remember which nodes you have visited"
        for what, leaf in [
            ("y = w * w + w (w used three times)", "w"),
            ("y = (a * b + a * x).sum()", "a"),
        ]
    ]


def test_every_leaf_listed_twice_is_named():
    result = check_leaves_of(lambda t: right_leaves_of(t) * 2)
    assert len(result.messages) == 4  # x and y have no leaves to list twice
    assert "on y = (a * b + a * x).sum(), leaves_of lists a, b more than once" in text(result)


def test_returning_nodes_instead_of_tensors_is_reported():
    def leaves_of(t):
        if t.grad_fn is None:
            return []
        return [n for n, _ in t.grad_fn.next_functions if hasattr(n, "variable")]

    result = check_leaves_of(leaves_of)
    assert result.messages == [
        "on y = (w * x).sum(), leaves_of misses w",
        "on y = w * w + w (w used three times), leaves_of returned backward functions (such as "
        "AccumulateGrad); return the leaf tensors: an AccumulateGrad node keeps its leaf in "
        ".variable",
        "on y = (a * b + a * x).sum(), leaves_of misses a, b",
        "on w itself (a leaf that requires grad), leaves_of misses w: it has no grad_fn, but a "
        "leaf that requires grad is its own leaf",
    ]


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
    assert result.messages == [
        f"on {what}, leaves_of returned 1 tensor(s) that backward() would not fill ({name}): "
        "only leaves that require grad get .grad"
        for what, name in [
            ("x itself (requires_grad=False)", "x"),
            ("y = w.detach() * 2 (no graph at all)", "y"),
        ]
    ]


def test_a_tensor_from_elsewhere_is_described_by_its_shape():
    result = check_leaves_of(lambda t: [torch.ones(3, requires_grad=True)])
    assert result.messages[1] == (
        "on y = (w * x).sum(), leaves_of returned 1 tensor(s) that backward() would not fill "
        "(a tensor of shape [3]): only leaves that require grad get .grad"
    )


def test_only_the_first_level_is_reported_as_missing_leaves():
    def leaves_of(t):
        if t.grad_fn is None:
            return [t] if t.requires_grad else []
        return [n.variable for n, _ in t.grad_fn.next_functions if hasattr(n, "variable")]

    result = check_leaves_of(leaves_of)
    assert result.messages == [
        "on y = (w * x).sum(), leaves_of misses w",
        "on y = (a * b + a * x).sum(), leaves_of misses a, b",
    ]


def test_wrong_return_type_is_reported_for_every_graph():
    result = check_leaves_of(lambda t: {"w": t})
    assert len(result.messages) == 6
    assert result.messages[0] == (
        "on y = (w * x).sum(), leaves_of returned a dict; return a list of tensors"
    )


def test_items_that_are_not_tensors_are_named_for_every_graph():
    result = check_leaves_of(lambda t: [1, "w"])
    assert len(result.messages) == 6
    assert result.messages[0] == "on y = (w * x).sum(), leaves_of returned int, str; return tensors"


@pytest.mark.parametrize(("returned", "shown"), [(..., "Ellipsis"), (None, "None")])
def test_leaves_of_that_returns_nothing_is_told_what_it_returned(returned, shown):
    assert check_leaves_of(lambda t: returned).messages == [
        f"leaves_of returned {shown}: replace the `...` and return a list of tensors"
    ]
