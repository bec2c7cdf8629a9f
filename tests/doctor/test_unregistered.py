"""helpers.doctor.unregistered: what a model holds that nn.Module never registered, named as
named_parameters() would have named it, with the line of __init__ that made it."""

from __future__ import annotations

import torch
from torch import nn

from helpers.doctor.unregistered import find_unregistered


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = []
        self.layers.append(nn.Linear(2, 2))
        self.gates = {"in": torch.zeros(2, requires_grad=True), "out": torch.zeros(2)}


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()  # registered: its plain attributes are still found
        self.shared = nn.Linear(2, 2)
        self.again = [self.shared]  # a registered layer listed again: not unregistered
        self.kept = nn.ParameterList([nn.Parameter(torch.ones(1))])
        self.weights = (torch.ones(1, requires_grad=True),)
        self.made_from = self.weights[0] * 2  # requires grad, but not a leaf: nothing to train


def test_every_unregistered_leaf_is_named_with_its_holder_fix_and_line():
    found = {u.name: u for u in find_unregistered(Outer())}
    assert list(found) == [
        "weights[0]",
        "block.layers[0].weight",
        "block.layers[0].bias",
        "block.gates['in']",
    ]
    assert [found["weights[0]"].holder, found["weights[0]"].fix] == ["tuple", "nn.ParameterList"]
    layer = found["block.layers[0].weight"]
    assert (layer.holder, layer.fix, layer.attribute) == ("list", "nn.ModuleList", "self.layers")
    assert layer.made_at.code == "self.layers = []"  # the first line that assigns or fills it
    gate = found["block.gates['in']"]
    assert (gate.holder, gate.fix) == ("dict", "nn.ParameterDict")
    assert gate.made_at.code.startswith("self.gates = {")
    assert found["weights[0]"].made_at.code == "self.weights = (torch.ones(1, requires_grad=True),)"


def test_a_tensor_attribute_and_the_line_in_a_base_class():
    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.ones(1, requires_grad=True)

    class Child(Base):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(1, 1)

    class GrandChild(Child):  # no __init__ of its own: the search goes on up
        pass

    for model in (Child(), GrandChild()):
        (scale,) = find_unregistered(model)
        assert (scale.name, scale.holder, scale.fix) == ("scale", "tensor", "nn.Parameter")
        assert scale.made_at.code == "self.scale = torch.ones(1, requires_grad=True)"
        assert scale.made_at.function == "__init__"
    namespace = {"Child": Child}
    exec(  # an __init__ whose source cannot be read: the search goes on to Base's
        "class Unreadable(Child):\n    def __init__(self):\n        super().__init__()\n",
        namespace,
    )
    (scale,) = find_unregistered(namespace["Unreadable"]())
    assert scale.made_at.code == "self.scale = torch.ones(1, requires_grad=True)"


def test_a_tensor_held_twice_is_listed_once():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.ones(1, requires_grad=True)
            self.also = [self.w]

    (w,) = find_unregistered(Twice())
    assert (w.name, w.holder) == ("w", "tensor")


def test_no_source_no_line_and_a_clean_model_has_nothing():
    namespace: dict = {}
    exec(  # a class whose source cannot be read
        "import torch\n"
        "class Made(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.ones(1, requires_grad=True)\n",
        namespace,
    )
    (w,) = find_unregistered(namespace["Made"]())
    assert w.name == "w" and w.made_at is None
    assert find_unregistered(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))) == []


def test_the_attribute_is_matched_whole():
    class Similar(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers_count = 1
            # (self.layers == [] would compare, not assign)
            self.layers = [nn.Linear(1, 1)]

    (weight, _) = find_unregistered(Similar())
    assert weight.made_at.code == "self.layers = [nn.Linear(1, 1)]"


def test_a_tensor_computed_from_a_leaf_nothing_holds_is_found():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))
            self.scale = torch.randn(1, requires_grad=True) * 0.1  # its leaf: held by nothing
            self.w_view = self.w.view(2, 1)  # from a registered leaf: follows it
            self.offset = torch.zeros(1) + 1  # requires no grad

    (scale,) = find_unregistered(Scaled())
    assert (scale.name, scale.holder, scale.fix) == ("scale", "tensor", "nn.Parameter")
    assert scale.computed and not scale.nested and not scale.tensor.is_leaf
    assert scale.made_at.code.startswith("self.scale = torch.randn(1, requires_grad=True)")


def test_layers_in_containers_inside_containers_are_found_with_their_nested_fix():
    class Nested(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [[nn.Linear(1, 1)], {"gate": torch.ones(1, requires_grad=True)}]
            self.deep = [[[nn.Linear(1, 1, bias=False)]]]
            self.loop = []
            self.loop.append(self.loop)  # a list that holds itself: the search ends

    found = {u.name: u for u in find_unregistered(Nested())}
    assert list(found) == [
        "blocks[0][0].weight",
        "blocks[0][0].bias",
        "blocks[1]['gate']",
        "deep[0][0][0].weight",
    ]
    layer, gate, deep = (
        found["blocks[0][0].bias"],
        found["blocks[1]['gate']"],
        found["deep[0][0][0].weight"],
    )
    assert (layer.holder, layer.nested, layer.fix) == (
        "list",
        True,
        "nn.ModuleList([nn.ModuleList([...]), ...])",
    )
    assert gate.fix == "nn.ModuleList([nn.ParameterDict({...}), ...])"
    assert deep.fix == "nn.ModuleList([nn.ModuleList([nn.ModuleList([...]), ...]), ...])"
    assert not found["blocks[0][0].weight"].computed


def test_containers_are_searched_eight_deep_and_no_deeper():
    def nested(depth: int) -> object:
        value: object = torch.ones(1, requires_grad=True)
        for _ in range(depth):
            value = [value]
        return value

    class Deep(nn.Module):
        def __init__(self):
            super().__init__()
            self.eight = nested(8)
            self.nine = nested(9)

    assert [u.name for u in find_unregistered(Deep())] == ["eight" + "[0]" * 8]
