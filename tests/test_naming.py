"""helpers.naming: one way to name tensors, the same in every helper that shows names."""

import re

import pytest
import torch

from helpers.graph import autograd_graph
from helpers.memory import saved_in_graph
from helpers.naming import HOW, a_type, named_tensors
from helpers.params import snapshot
from helpers.state import tensor_state


def layer():
    torch.manual_seed(0)
    return torch.nn.Linear(2, 1)


FORMS = {
    "a model": lambda m: m,
    "a dict": lambda m: {"weight": m.weight, "bias": m.bias},
    "named_parameters()": lambda m: m.named_parameters(),
}


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_every_helper_takes_the_same_forms_and_shows_the_same_names(form):
    model = layer()
    names = FORMS[form]
    x = torch.ones(3, 2, requires_grad=True)  # so addmm saves the weight too
    loss = model(x).tanh().sum()
    graph = {n.label.split("\n")[0] for n in autograd_graph(loss, params=names(model)).nodes}
    assert {"weight", "bias"} <= graph
    assert tensor_state(names(model)).column("tensor") == ["weight", "bias"]
    assert list(snapshot(names(model))) == ["weight", "bias"]
    held = {s.owner for s in saved_in_graph(loss, known=names(model))}
    assert "weight" in held and held <= {"weight", "bias", None}


def test_tensor_state_takes_a_model_and_keywords_together():
    model = layer()
    x = torch.ones(1, 2)
    assert tensor_state(model, x=x).column("tensor") == ["weight", "bias", "x"]


def test_the_forms_and_their_names():
    w, b = torch.ones(2), torch.zeros(1)
    assert list(named_tensors({"w": w}, "a")) == ["w"]
    assert list(named_tensors([("w", w), ("b", b)], "a")) == ["w", "b"]
    assert list(named_tensors([w, b], "a")) == ["0", "1"]
    assert list(named_tensors(w, "a")) == ["tensor"]
    bn = torch.nn.BatchNorm1d(2)
    assert list(named_tensors(bn, "a")) == ["weight", "bias"]
    assert "running_mean" in named_tensors(bn, "a", buffers=True)


def test_bad_names_say_what_to_pass_in_every_helper():
    with pytest.raises(TypeError) as none:
        named_tensors(None, "before")
    assert str(none.value) == f"before is None; pass {HOW}"
    with pytest.raises(TypeError) as kind:
        named_tensors("w", "params", example="e.g. params={'w': w}")
    assert str(kind.value) == f"params is a str; pass {HOW}; e.g. params={{'w': w}}"
    with pytest.raises(TypeError) as value:
        named_tensors({"w": 1.5}, "known")
    assert str(value.value) == "known['w'] is a float, not a tensor"
    for call in (
        lambda: tensor_state(3),
        lambda: snapshot(3),
        lambda: autograd_graph(torch.ones(1, requires_grad=True).sum(), params=3),
        lambda: saved_in_graph(torch.ones(1, requires_grad=True).exp(), known=3),
    ):
        with pytest.raises(TypeError, match=re.escape(f"is an int; pass {HOW}")):
            call()


def test_a_list_of_two_element_tensors_is_named_by_position_not_read_as_pairs():
    pair = [torch.ones(2), torch.zeros(2)]
    assert list(named_tensors(pair, "a")) == ["0", "1"]


def test_a_type_is_named_with_its_article():
    assert [a_type(v) for v in (ArithmeticError(), EOFError(), 3, object(), ...)] == [
        "an ArithmeticError",
        "an EOFError",
        "an int",
        "an object",
        "an ellipsis",
    ]
    assert [a_type(v) for v in ([], UnicodeError(), None)] == [
        "a list",
        "a UnicodeError",  # said "you-nicode"
        "a NoneType",
    ]


def test_a_type_goes_by_sound_for_an_abbreviation():
    import numpy as np

    assert a_type(np.ones(2)) == "an ndarray"  # "en-dee-array"
    assert a_type(torch.nn.MSELoss()) == "an MSELoss"
    assert a_type(torch.nn.LSTM(2, 2)) == "an LSTM"
    assert a_type(torch.nn.GRU(2, 2)) == "a GRU"  # "gee"
    assert a_type(torch.nn.ReLU()) == "a ReLU"  # a word, not letters
    assert a_type("text") == "a str"  # said "string"
