"""helpers.shapes: one notation for shapes, "[2, 3]" and "scalar", in every table and graph."""

import numpy as np
import pytest
import torch

from helpers.graph import autograd_graph, show_graph
from helpers.memory import saved_in_graph, saved_table
from helpers.params import param_diff
from helpers.ranks.split_display import wire_table
from helpers.ranks.split_ranks import WireRecord
from helpers.shapes import SCALAR, shape_text
from helpers.split import compare_tensors
from helpers.state import describe_grad, tensor_state


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        (torch.ones(2, 3), "[2, 3]"),
        (torch.tensor(1.5), "scalar"),
        (torch.ones(0), "[0]"),
        (torch.Size([1, 5, 6]), "[1, 5, 6]"),
        (torch.Size([]), "scalar"),
        ((4,), "[4]"),
        ([2, 1, 3, 3], "[2, 1, 3, 3]"),
        ((), "scalar"),
        ((np.int64(3), 2), "[3, 2]"),
    ],
)
def test_shape_text_writes_shapes_as_torch_size_prints_them(shape, text):
    assert shape_text(shape) == text
    assert SCALAR == "scalar"


def test_shape_text_matches_torch_size_for_every_non_scalar():
    for t in (torch.ones(3), torch.ones(2, 3), torch.ones(1, 1, 3, 3)):
        assert f"torch.Size({shape_text(t)})" == repr(t.shape)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("2, 3", r"takes a tensor or a shape such as t.shape or \(2, 3\), got '2, 3' \(str\)"),
        (3, r"got 3 \(int\)"),
        (None, r"got None \(NoneType\)"),
        ((2.0, 3), r"a shape holds whole numbers, got 2.0 in \(2.0, 3\)"),
        ((True,), r"a shape holds whole numbers, got True"),
    ],
)
def test_shape_text_rejects_what_is_not_a_shape(bad, message):
    with pytest.raises(TypeError, match=message):
        shape_text(bad)


def _every_helper_shows(t: torch.Tensor) -> dict[str, str]:
    """The shape text each table or graph helper shows for a tensor of `t`'s shape."""
    w = t.detach().clone().requires_grad_(True)
    x = torch.full(t.shape, 2.0)
    loss = (w * x).exp().sum()  # MulBackward0 saves x: a saved tensor of t's shape
    leaf = next(n for n in autograd_graph(loss, params={"w": w}).nodes if n.kind == "leaf")
    text = show_graph(loss, params={"w": w}).text()
    leaf_line = next(line for line in text.splitlines() if line.endswith("<leaf>"))
    saved = saved_table(saved_in_graph(loss, known={"x": x}))
    differ = compare_tensors({"a": (w, torch.ones(9, 9))}).row("a")["note"]
    wire = WireRecord(1, "forward", 0, 1, "f1", tuple(t.shape), "float32", 4 * t.numel())
    shown = {
        "tensor_state": tensor_state(w=w).row("w")["shape"],
        "graph label": leaf.label.split("\n")[1],
        "graph text": leaf_line.split("w ", 1)[1].removesuffix("  <leaf>"),
        "saved_table": next(r["shape"] for r in saved.rows if r["held by"] == "x"),
        "param_diff": param_diff({"w": w}, {"w": w + 1}).row("w")["shape"],
        "compare_tensors": differ.removeprefix("shapes differ: ").split(" vs ")[0],
        "wire_table": wire_table([wire]).row(1)["shape"],
    }
    if t.numel() > 6:  # a larger gradient is described by its shape and norm
        shown["describe_grad"] = describe_grad(x).removeprefix("shape ").split(", norm")[0]
    return shown


@pytest.mark.parametrize("t", [torch.ones(2, 4), torch.tensor(1.5), torch.ones(7), torch.ones(3)])
def test_every_table_and_graph_shows_the_same_text_for_the_same_shape(t):
    shown = _every_helper_shows(t)
    assert len(shown) >= 7
    assert shown == dict.fromkeys(shown, shape_text(t))
