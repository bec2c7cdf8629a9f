"""A catalogue of what learners really pass to the helpers, and the message each one gets.

Every case must raise the named error type with a message that names what was wrong (the regex),
or give a sensible result (the `ok` cases).
"""

import pytest
import torch

from helpers import checks, display, graph, params, state


def freed_graph():
    w = torch.ones(2, requires_grad=True)
    y = w.exp().sum()
    y.backward()
    return y


def call_expect_error(kind):
    with checks.expect_error(kind):
        pass


def call_expect_warning(kind):
    with checks.expect_warning(kind):
        pass


ERRORS = [
    ("show_graph with no tensor", lambda: graph.show_graph(), TypeError, "at least one tensor"),
    ("show_graph(int)", lambda: graph.show_graph(3), TypeError, r"argument 1 is an int \(3\)"),
    ("show_graph(None)", lambda: graph.show_graph(None), TypeError, "argument 1 is a NoneType"),
    ("show_graph(str)", lambda: graph.show_graph("loss"), TypeError, "argument 1 is a str"),
    ("show_graph(module)", lambda: graph.show_graph(torch.nn.Linear(1, 1)), TypeError, "Linear"),
    ("show_graph(numpy)", lambda: graph.show_graph(torch.ones(2).numpy()), TypeError, "ndarray"),
    (
        "show_graph(list of tensors and an int)",
        lambda: graph.show_graph([torch.ones(1), 2]),
        TypeError,
        "argument 2 is an int",
    ),
    (
        "params as a number",
        lambda: graph.show_graph(torch.ones(1), params=1),
        TypeError,
        "params is an int; pass a model",
    ),
    (
        "params value not a tensor",
        lambda: graph.show_graph(torch.ones(1), params={"w": 1.0}),
        TypeError,
        r"params\['w'\] is a float",
    ),
    ("tensor_state()", lambda: state.tensor_state(), TypeError, "needs named tensors"),
    ("tensor_state(x=list)", lambda: state.tensor_state(x=[1.0]), TypeError, "x= is a list"),
    ("tensor_state(x=None)", lambda: state.tensor_state(x=None), TypeError, "x= is a NoneType"),
    ("snapshot(None)", lambda: params.snapshot(None), TypeError, "is None; pass a model"),
    ("snapshot(int)", lambda: params.snapshot(5), TypeError, "is an int; pass a model"),
    ("snapshot(dict of ints)", lambda: params.snapshot({"w": 1}), TypeError, r"\['w'\] is an int"),
    (
        "snapshot(empty model)",
        lambda: params.snapshot(torch.nn.ReLU()),
        ValueError,
        "no parameters",
    ),
    ("snapshot({})", lambda: params.snapshot({}), ValueError, "no parameters"),
    (
        "param_diff of different models",
        lambda: params.param_diff(torch.nn.Linear(2, 2), torch.nn.Conv1d(2, 2, 1)),
        ValueError,
        "has shape",
    ),
    (
        "param_diff with renamed parameters",
        lambda: params.param_diff({"a": torch.ones(1)}, {"b": torch.ones(1)}),
        ValueError,
        r"only in before: \['a'\]; only in after: \['b'\]",
    ),
    (
        "param_diff(None, model)",
        lambda: params.param_diff(None, torch.nn.Linear(1, 1)),
        TypeError,
        "before is None",
    ),
    (
        "show_param_diff(model, None)",
        lambda: params.show_param_diff(torch.nn.Linear(1, 1), None),
        TypeError,
        "after is None",
    ),
    ("expect_error('RuntimeError')", lambda: call_expect_error("RuntimeError"), TypeError, "class"),
    ("expect_error(instance)", lambda: call_expect_error(RuntimeError()), TypeError, "class"),
    ("expect_warning(None)", lambda: call_expect_warning(None), TypeError, "class"),
    (
        "Table row lacking a column",
        lambda: display.Table(["a", "b"], [{"a": 1}]),
        ValueError,
        r"lacks the column\(s\) \['b'\]",
    ),
    (
        "Table.row of an unknown key",
        lambda: display.Table(["a"], [{"a": 1}]).row(2),
        KeyError,
        "rows are: 1",
    ),
]


@pytest.mark.parametrize("case, call, kind, message", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_gets_a_clear_message(case, call, kind, message):
    with pytest.raises(kind, match=message):
        call()


def test_there_are_at_least_twenty_cases():
    assert len(ERRORS) >= 20


# Inputs that are unusual but valid: a sensible result, not an error.
def test_integer_tensor_has_no_graph_but_is_drawn():
    data = graph.autograd_graph(torch.tensor([1, 2, 3]))
    assert "no graph: requires_grad=False" in data.nodes[0].label


def test_freed_graph_is_drawn_with_freed_saved_tensors():
    data = graph.autograd_graph(freed_graph(), show_saved=True)
    assert data.kinds().get("freed") == 1


def test_integer_parameters_can_be_diffed():
    before = {"steps": torch.tensor([1, 2, 3])}
    after = {"steps": torch.tensor([1, 5, 3])}
    diff = params.param_diff(before, after)
    assert diff["steps"].n_changed == 1 and diff["steps"].max_abs == 3


def test_huge_graph_is_summarised_in_text_and_builds_quickly():
    x = torch.ones(1, requires_grad=True)
    for _ in range(2000):
        x = x * 1.0
    g = graph.show_graph(x)
    assert (
        g.text().splitlines()[0]
        == "autograd graph: 2003 nodes, 2002 edges (2001 function, 1 leaf, 1 output)"
    )


def test_named_parameters_iterator_and_tensor_list_are_accepted():
    model = torch.nn.Linear(2, 1)
    assert list(params.snapshot(model.named_parameters())) == ["weight", "bias"]
    assert list(params.snapshot([torch.ones(1), torch.zeros(2)])) == ["0", "1"]
