"""helpers.graph: deterministic autograd graphs, torchviz-compatible structure, clear failures."""

import re
import warnings
from collections import Counter

import graphviz
import pytest
import torch

from helpers import graph as graph_module
from helpers.graph import autograd_graph, show_graph


def small_net_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    loss = model(torch.ones(5, 3)).pow(2).mean()
    return model, loss


def test_same_computation_gives_identical_dot_text():
    _, first = small_net_loss()
    _, second = small_net_loss()
    assert show_graph(first).source == show_graph(second).source


def test_node_ids_are_numbered_in_order_met():
    _, loss = small_net_loss()
    ids = [n.id for n in autograd_graph(loss).nodes]
    assert ids == [f"n{i}" for i in range(len(ids))]


def _torchviz_structure(dot_source):
    labels, edges = {}, []
    for m in re.finditer(r'^\s*(\d+) \[label=(?:"([^"]*)"|([^\s\]]+))', dot_source, re.M):
        labels[m.group(1)] = re.sub(r"\s", "", m.group(2) if m.group(2) is not None else m.group(3))
    for m in re.finditer(r"^\s*(\d+) -> (\d+)", dot_source, re.M):
        edges.append((labels[m.group(1)], labels[m.group(2)]))
    return Counter(labels.values()), Counter(edges)


def test_structure_matches_torchviz():
    torchviz = pytest.importorskip("torchviz")
    model, loss = small_net_loss()
    params = dict(model.named_parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        reference = torchviz.make_dot(loss, params=params).source
    ours = autograd_graph(loss, params=params)
    label = {n.id: re.sub(r"\s", "", n.label) for n in ours.nodes}
    ref_nodes, ref_edges = _torchviz_structure(reference)
    our_nodes = Counter(label.values())
    our_edges = Counter((label[e.src], label[e.dst]) for e in ours.edges)
    assert our_nodes == ref_nodes
    assert our_edges == ref_edges


def test_params_name_leaves_and_module_is_accepted():
    model, loss = small_net_loss()
    data = autograd_graph(loss, params=model)
    leaves = sorted(n.label.split("\n")[0] for n in data.nodes if n.kind == "leaf")
    assert leaves == ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_saved_tensors_shown_then_marked_freed_after_backward():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    y = w.exp().sum()
    before = autograd_graph(y, show_saved=True).kinds()
    y.backward()
    after = autograd_graph(y, show_saved=True).kinds()
    assert before.get("saved") == 1 and "freed" not in before
    assert after.get("freed") == 1 and "saved" not in after
    assert w.grad is not None  # the graph structure and the leaf's grad remain


def test_several_roots_and_shared_nodes():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    h = w * 3
    a, b = h.sum(), h.mean()
    data = autograd_graph(a, b)
    assert len(data.roots) == 2
    assert data.function_names().count("MulBackward0") == 1  # shared, drawn once
    assert len(data.edges) == len(set(data.edges))  # and its edges too
    # a, b, SumBackward0, MeanBackward0, MulBackward0, AccumulateGrad, w
    assert len(data.nodes) == 7 and len(data.edges) == 6


def test_view_base_is_linked_with_a_view_edge():
    w = torch.ones(4, requires_grad=True)
    v = (w * 2)[:2]
    data = autograd_graph(v)
    assert "view_base" in data.kinds()
    assert any(e.style == "view" for e in data.edges)


def test_tensor_without_graph_gives_one_labelled_node():
    data = autograd_graph(torch.zeros(2))
    assert [n.kind for n in data.nodes] == ["output"]
    assert "no graph" in data.nodes[0].label


def test_long_chain_does_not_hit_recursion_limit():
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(3000):
        y = y + 1
    assert len(autograd_graph(y).nodes) == 3003


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "needs at least one tensor"),
        ((3,), "argument 1 is a int"),
        ((None,), "argument 1 is a NoneType"),
        (([1.0, 2.0],), "argument 1 is a float"),
    ],
)
def test_bad_roots_name_the_argument(args, message):
    with pytest.raises(TypeError, match=message):
        show_graph(*args)


def test_bad_params_are_explained():
    y = torch.ones(2, requires_grad=True).sum()
    with pytest.raises(TypeError, match="params must be a dict"):
        show_graph(y, params=[1, 2])
    with pytest.raises(TypeError, match=r"params\['w'\] is a int"):
        show_graph(y, params={"w": 3})


def test_display_bundle_has_svg_and_stable_text():
    if not graph_module.dot_available():
        pytest.skip("graphviz's dot is not installed")
    y = torch.ones(2, requires_grad=True).sum()
    bundle = show_graph(y)._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    assert bundle["text/plain"].startswith("autograd graph: 4 nodes, 3 edges")


def test_missing_dot_shows_instructions_and_text(monkeypatch):
    monkeypatch.setattr(graph_module, "dot_available", lambda: False)
    y = torch.ones(2, requires_grad=True).sum()
    bundle = show_graph(y)._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert "sudo apt-get install graphviz" in bundle["text/plain"]
    assert "brew install graphviz" in bundle["text/plain"]
    assert "SumBackward0" in bundle["text/plain"]


def test_text_rendering_marks_repeated_subtrees():
    w = torch.ones(2, requires_grad=True)
    h = w * 2
    text = show_graph(h + h.exp()).text()
    assert "(see above)" in text


def test_one_place_decides_picture_or_text(monkeypatch):
    """`picture_bundle` is the only switch: without `dot` any picture shows its text and the
    install advice; when `dot` vanishes after it was found, too; when `dot` fails, the error."""
    y = torch.ones(2, requires_grad=True).sum()
    graph = show_graph(y)
    monkeypatch.setattr(graph_module, "dot_available", lambda: False)
    assert graph_module.picture_bundle(graph, "TEXT") == {
        "text/plain": graph_module.missing_dot_message() + "\n\nTEXT"
    }
    monkeypatch.setattr(graph_module, "dot_available", lambda: True)

    def missing(*args, **kwargs):
        raise graphviz.ExecutableNotFound(["dot", "-Tsvg"])

    monkeypatch.setattr(graphviz.Digraph, "pipe", missing)
    bundle = graph._repr_mimebundle_()
    assert bundle == {"text/plain": graph_module.missing_dot_message() + "\n\n" + graph.text()}

    def fails(*args, **kwargs):
        raise graphviz.CalledProcessError(1, ["dot", "-Tsvg"], stderr="syntax error in line 3")

    monkeypatch.setattr(graphviz.Digraph, "pipe", fails)
    text = graph._repr_mimebundle_()["text/plain"]
    assert text.startswith("Graph picture failed (Command ") and text.endswith(graph.text())


def long_chain(length=3000):
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(length):
        y = y + 1
    return y


def test_long_graphs_text_is_capped_in_lines_and_in_depth():
    y = long_chain()
    lines = show_graph(y).text().splitlines()
    shown = lines[1:-1]  # the header, the node lines, the note on what was left out
    assert len(shown) == graph_module.MAX_TEXT_LINES
    last = re.fullmatch(r"\.\.\. \((\d+) more nodes not shown as text\)", lines[-1])
    assert last, lines[-1]
    assert int(last.group(1)) + len(shown) == len(autograd_graph(y).nodes) == 3003
    indents = [len(line) - len(line.lstrip(" │├└─")) for line in shown]
    assert max(indents) == 4 * (graph_module.MAX_TEXT_DEPTH + 1)  # then it stops growing
    assert indents[-1] == max(indents)


def test_short_graphs_text_is_not_cut():
    lines = show_graph(long_chain(10)).text().splitlines()
    assert len(lines) == 1 + 13 and not any("not shown as text" in line for line in lines)
