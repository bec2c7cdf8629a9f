"""helpers.graph: deterministic autograd graphs, torchviz-compatible structure, clear failures."""

import re
import warnings
from collections import Counter

import graphviz
import numpy as np
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


def _course_shape(label):
    """A torchviz label with its shape in the course's notation: "(4, 3)" -> "[4, 3]", "()" ->
    "scalar" (torchviz writes shapes as tuples; the course as torch.Size prints them)."""
    return re.sub(r"\(([\d, ]*)\)$", lambda m: f"[{m.group(1)}]" if m.group(1) else "scalar", label)


def _torchviz_structure(dot_source):
    labels, edges = {}, []
    for m in re.finditer(r'^\s*(\d+) \[label=(?:"([^"]*)"|([^\s\]]+))', dot_source, re.M):
        label = m.group(2) if m.group(2) is not None else m.group(3)
        labels[m.group(1)] = re.sub(r"\s", "", _course_shape(label))
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
        ((3,), "argument 1 is an int"),
        ((None,), "argument 1 is a NoneType"),
        (([1.0, 2.0],), "argument 1 is a float"),
    ],
)
def test_bad_roots_name_the_argument(args, message):
    with pytest.raises(TypeError, match=message):
        show_graph(*args)


def test_bad_params_are_explained():
    y = torch.ones(2, requires_grad=True).sum()
    with pytest.raises(TypeError, match="params is an int; pass a model"):
        show_graph(y, params=3)
    with pytest.raises(TypeError, match=r"params\['w'\] is an int"):
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


# --- the graph as data: nodes, labels, shapes, edges ------------------------------------------

Node, Edge = graph_module.GraphNode, graph_module.GraphEdge


def exp_of_product():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    return w, x, (w * x).exp().sum()


def test_saved_tensors_are_nodes_named_by_slot_and_by_params():
    w, x, y = exp_of_product()
    data = autograd_graph(y, params={"w": w, "x": x}, show_saved=True)
    assert data.nodes == [
        Node("n0", "output", "scalar", ()),
        Node("n1", "function", "SumBackward0"),
        Node("n2", "function", "ExpBackward0"),
        Node("n3", "saved", "result\n[2]", (2,)),
        Node("n4", "function", "MulBackward0"),
        Node("n5", "saved", "other = x\n[2]", (2,)),
        Node("n6", "saved", "self = w\n[2]", (2,)),
        Node("n7", "function", "AccumulateGrad"),
        Node("n8", "function", "AccumulateGrad"),
        Node("n9", "leaf", "w\n[2]", (2,)),
        Node("n10", "leaf", "x\n[2]", (2,)),
    ]
    assert data.edges == [
        Edge("n2", "n1"),
        Edge("n2", "n3", "saved"),
        Edge("n4", "n2"),
        Edge("n4", "n5", "saved"),
        Edge("n4", "n6", "saved"),
        Edge("n7", "n4"),
        Edge("n8", "n4"),
        Edge("n9", "n7"),
        Edge("n10", "n8"),
        Edge("n1", "n0"),
    ]
    assert data.roots == ["n0"]
    assert data.kinds() == {"output": 1, "function": 5, "saved": 3, "leaf": 2}


def test_each_node_id_leads_back_to_its_torch_object():
    w, x, y = exp_of_product()
    data = autograd_graph(y, show_saved=True)
    assert data.objects["n0"] is y and data.objects["n1"] is y.grad_fn
    assert data.objects["n9"] is w and data.objects["n10"] is x
    torch.testing.assert_close(data.objects["n3"], (w * x).exp().detach())
    assert data.node("n4").label == "MulBackward0"
    with pytest.raises(KeyError) as err:
        data.node("n99")
    assert err.value.args[0] == "no node 'n99' in this graph"


def test_every_saved_slot_gets_its_own_node():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    loss = model(torch.ones(5, 3)).pow(2).mean()
    saved = [
        n.label.split("\n")[0]
        for n in autograd_graph(loss, show_saved=True).nodes
        if n.kind == "saved"
    ]
    # the first layer's input needs no grad, so its mat2 is not saved
    assert saved == ["self", "mat1", "mat2", "result", "mat1"]


def test_a_tuple_of_saved_tensors_is_numbered():
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w[torch.tensor([0, 2])].sum()
    saved = [n for n in autograd_graph(y, show_saved=True).nodes if n.kind == "saved"]
    assert saved == [Node("n3", "saved", "indices[0]\n[2]", (2,))]


def test_a_freed_saved_tensor_stays_as_a_freed_node():
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w.exp().sum()
    y.backward()
    data = autograd_graph(y, show_saved=True)
    assert data.nodes[3] == Node("n3", "freed", "result\n[freed]")
    assert Edge("n2", "n3", "saved") in data.edges


def test_every_freed_slot_of_a_function_gets_its_own_node():
    w, x, _ = exp_of_product()
    y = (w * x).sum()
    y.backward()
    freed = [n for n in autograd_graph(y, show_saved=True).nodes if n.kind == "freed"]
    assert [n.label for n in freed] == ["other\n[freed]", "self\n[freed]"]
    assert freed[0].id != freed[1].id


def test_a_root_is_drawn_once_and_a_root_without_history_says_why():
    w = torch.ones(2, requires_grad=True)
    y = (w * 2).sum()
    assert autograd_graph(y, y).roots == ["n0"]
    assert autograd_graph(w).nodes == [Node("n0", "output", "[2]\n[leaf, requires_grad]", (2,))]
    plain = autograd_graph(torch.zeros(2, 3), params={"z": torch.zeros(1)})
    assert plain.nodes == [Node("n0", "output", "[2, 3]\n[no graph: requires_grad=False]", (2, 3))]


def test_a_shared_function_is_walked_once_and_the_walk_goes_on():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    h = w * 2
    text = show_graph((h + h.exp()) + x, params={"w": w, "x": x}).text()
    assert text == "\n".join(
        [
            "autograd graph: 9 nodes, 9 edges (6 function, 2 leaf, 1 output)",
            "[2]  <output>",
            "└── AddBackward0  <function>",
            "    ├── AddBackward0  <function>",
            "    │   ├── MulBackward0  <function>",
            "    │   │   └── AccumulateGrad  <function>",
            "    │   │       └── w [2]  <leaf>",
            "    │   └── ExpBackward0  <function>",
            "    │       └── MulBackward0  <function>  (see above)",
            "    └── AccumulateGrad  <function>",
            "        └── x [2]  <leaf>",
        ]
    )


def test_a_view_links_to_its_base_and_the_base_to_its_history():
    w = torch.ones(3, requires_grad=True)
    data = autograd_graph((w * 2)[:2])
    assert data.nodes == [
        Node("n0", "output", "[2]", (2,)),
        Node("n1", "function", "SliceBackward0"),
        Node("n2", "function", "MulBackward0"),
        Node("n3", "function", "AccumulateGrad"),
        Node("n4", "leaf", "[3]", (3,)),
        Node("n5", "view_base", "[3]", (3,)),
    ]
    assert data.edges[-2:] == [Edge("n5", "n0", "view"), Edge("n2", "n5")]
    assert show_graph((w * 2)[:2]).text() == "\n".join(
        [
            "autograd graph: 6 nodes, 6 edges (3 function, 1 leaf, 1 output, 1 view_base)",
            "[2]  <output>",
            "├── SliceBackward0  <function>",
            "│   └── MulBackward0  <function>",
            "│       └── AccumulateGrad  <function>",
            "│           └── [3]  <leaf>",
            "└── view of [3]  <view_base>",
            "    └── MulBackward0  <function>  (see above)",
        ]
    )


def test_a_base_already_in_the_graph_is_not_drawn_twice():
    w = torch.ones(2, requires_grad=True)
    leaf_view = autograd_graph(w[:1])  # the base is the leaf itself
    assert leaf_view.edges[-1] == Edge("n3", "n0", "view") and len(leaf_view.nodes) == 4
    h = w * 2
    data = autograd_graph(h, h[:1])  # the base is the first root
    assert [n.kind for n in data.nodes] == [
        "output",
        "function",
        "function",
        "leaf",
        "output",
        "function",
    ]
    assert data.edges[-1] == Edge("n0", "n4", "view")
    assert data.edges.count(Edge("n1", "n0")) == 1


def test_text_shows_saved_and_freed_tensors_under_their_function():
    w, x, y = exp_of_product()
    text = show_graph(y, params={"w": w, "x": x}, show_saved=True).text()
    assert text.splitlines()[:7] == [
        "autograd graph: 11 nodes, 10 edges (5 function, 2 leaf, 1 output, 3 saved)",
        "scalar  <output>",
        "└── SumBackward0  <function>",
        "    └── ExpBackward0  <function>",
        "        ├── saved result [2]  <saved>",
        "        └── MulBackward0  <function>",
        "            ├── saved other = x [2]  <saved>",
    ]
    y.backward()
    assert "        ├── saved result [freed]  <freed>" in show_graph(y, show_saved=True).text()


# --- the picture: what each look means ------------------------------------------------------


def _statements(graph):
    """DOT statements of the graph's body: node id or (src, dst) -> its attributes."""
    found = {}
    for line in graph.body:
        m = re.fullmatch(r"\s*(\S+)(?: -> (\S+))?(?: \[(.*)\])?\s*", line, re.S)
        if not m:
            continue
        attrs = dict(re.findall(r'(\w+)=("[^"]*"|<<.*>>|\S+)', m.group(3) or "", re.S))
        found[(m.group(1), m.group(2)) if m.group(2) else m.group(1)] = attrs
    return found


def test_saved_edges_are_undirected_orange_and_view_edges_dotted():
    w, _, y = exp_of_product()
    dot = _statements(show_graph(y, show_saved=True))
    assert dot[("n2", "n3")] == {"dir": "none", "color": "darkorange"}
    assert dot[("n2", "n1")] == {}
    view = _statements(show_graph((w * 2)[:1]))
    assert view[("n5", "n0")] == {"style": "dotted"}


def test_each_kind_has_the_fill_colour_its_legend_swatch_shows():
    w = torch.ones(3, requires_grad=True)
    v = (w * 2)[:2]
    y = v.exp().sum()
    y.backward()
    graph = show_graph(y, v, show_saved=True)
    dot = _statements(graph)
    legend = dot.pop("legend")["label"]
    swatches = re.findall(
        r'BGCOLOR="(\w+)" WIDTH="14"( STYLE="dashed")?></TD><TD[^>]*>([^<]*)<', legend
    )
    kinds = [k for k in graph_module.LEGEND if k in graph.data.kinds()]
    assert kinds == ["output", "function", "leaf", "freed", "view_base"]
    assert [(colour, text) for colour, _, text in swatches] == [
        (graph_module.COLOURS[k], graph_module.legend_text(k)) for k in kinds
    ]
    assert [bool(dashed) for _, dashed, _ in swatches] == [k == "freed" for k in kinds]
    for n in graph.data.nodes:
        assert dot[n.id]["fillcolor"] == graph_module.COLOURS[n.kind]
        assert (dot[n.id].get("style") == "dashed") == (n.kind == "freed")


def test_nodes_are_filled_so_their_colours_show_and_the_legend_is_a_bare_table():
    graph = show_graph(torch.ones(2, requires_grad=True).exp().sum())
    assert re.search(r"^\s*node \[.*\bstyle=filled\b.*\]$", graph.source, re.M)
    legend = _statements(graph)["legend"]
    # no box and no fill around the table: it must not look like a node of the graph
    assert legend["shape"] == "plaintext" and legend["style"] == '""'
    assert re.fullmatch(
        r"<<TABLE [^>]*>(<TR>(<TD[^>]*>[^<]*</TD>){2}</TR>){3}</TABLE>>", legend["label"]
    )


def test_highlighted_and_dimmed_nodes_stand_out_from_the_rest():
    y = torch.ones(2, requires_grad=True).exp().sum()
    data = autograd_graph(y)
    dot = _statements(graph_module.AutogradGraph(data, highlight=["n1"], dimmed=["n2"]))
    assert "penwidth" in dot["n1"] and "color" in dot["n1"]
    assert dot["n2"]["style"] == '"filled,dashed"' and "fontcolor" in dot["n2"]
    for plain in ("n0", "n3", "n4"):
        assert set(dot[plain]) == {"label", "fillcolor"}
    assert "legend" in dot  # a legend unless asked not to


def test_show_graph_options_title_legend_and_saved():
    y = torch.ones(2, requires_grad=True).exp().sum()
    plain = show_graph(y)
    assert "legend" in _statements(plain) and "saved" not in plain.data.kinds()
    assert "labelloc" not in plain.source  # no title
    assert "legend" not in _statements(show_graph(y, legend=False))
    assert "saved" in show_graph(y, show_saved=True).data.kinds()
    titled = show_graph(y, title="exp, then sum")
    assert re.search(r'^\s*fontsize=12 label="exp, then sum" labelloc=t$', titled.source, re.M)
    assert titled.source.startswith("digraph autograd_graph {")


# --- messages -------------------------------------------------------------------------------


def test_missing_dot_message_says_what_to_install():
    assert graph_module.missing_dot_message() == (
        "Graph picture unavailable: graphviz's `dot` program is not installed, so here is the "
        "graph as text.\nInstall it, then restart the kernel:\n"
        "  Debian/Ubuntu: sudo apt-get install graphviz\n"
        "  macOS:         brew install graphviz\n"
        "  conda:         conda install -c conda-forge python-graphviz"
    )


def test_a_bad_root_is_shown_and_a_long_one_cut():
    with pytest.raises(TypeError) as err:
        autograd_graph(torch.ones(1), "y")
    assert str(err.value) == (
        "autograd_graph() expects tensors; argument 2 is a str ('y'). "
        "Pass the tensor whose graph you want, e.g. autograd_graph(loss)"
    )
    forty = "x" * 38  # repr adds the quotes: 40 characters, shown whole
    with pytest.raises(TypeError, match=re.escape(f"({forty!r})")):
        show_graph(forty)
    with pytest.raises(TypeError) as long:
        show_graph("x" * 39)
    assert "is a str ('" + "x" * 36 + "...)" in str(long.value)
    with pytest.raises(TypeError) as none:
        autograd_graph()
    assert str(none.value) == (
        "autograd_graph() needs at least one tensor, e.g. autograd_graph(loss)"
    )


def test_bad_params_messages_show_an_example():
    y = torch.ones(2, requires_grad=True).sum()
    with pytest.raises(TypeError) as kind:
        show_graph(y, params=3)
    assert str(kind.value) == (
        "params is an int; pass a model (nn.Module), a dict of name -> tensor, or "
        "model.named_parameters(); e.g. show_graph(loss, params=model) or params={'w': w}"
    )
    with pytest.raises(TypeError) as value:
        show_graph(y, params={"w": 3})
    assert str(value.value) == (
        "params['w'] is an int, not a tensor; "
        "e.g. show_graph(loss, params=model) or params={'w': w}"
    )


def test_a_call_without_a_tensor_names_the_function_called():
    with pytest.raises(TypeError, match=r"^show_graph\(\) needs at least one tensor"):
        show_graph()
    with pytest.raises(TypeError, match=r"^show_graph\(\) expects tensors; argument 1 is an int"):
        show_graph(3)


def test_a_chinese_edition_graph_speaks_chinese_in_a_chinese_face():
    from helpers.language import set_language

    w = torch.ones(3, requires_grad=True)
    y = (w.exp() * 2).sum()
    y.backward()
    english = show_graph(y, show_saved=True)
    set_language("zh")
    try:
        chinese = show_graph(y, show_saved=True)
    finally:
        set_language("en")
    legend = _statements(chinese)['"图例"']["label"]  # the legend's tooltip says 图例 too
    assert "反向函数（grad_fn）" in legend and "[已释放]" in chinese.source
    assert "legend" in _statements(english)
    assert "backward function" not in legend and "[freed]" not in chinese.source
    assert f'fontname="{graph_module.CHINESE_NODE_FONT}"' in chinese.source
    assert f'fontname="{graph_module.CHINESE_TITLE_FONT}"' in chinese.source
    assert "Noto Sans Mono CJK SC" not in english.source and "[freed]" in english.source
    assert 'label="标量"' in chinese.source and "标量" not in english.source  # y's shape
    assert "label=scalar" in english.source and "scalar" not in chinese.source


def test_a_chinese_edition_graph_s_text_form_is_chinese():
    """The text form is the picture's <title> (a screen reader's words for it) and the site's
    alternative text: in the twins it speaks Chinese, with the same numbers."""
    from helpers.language import set_language

    w = torch.ones(3, requires_grad=True)
    y = w.exp().sum()
    english = show_graph(y, show_saved=True).text()
    set_language("zh")
    try:
        chinese = show_graph(y, show_saved=True).text()
        alone = show_graph(torch.ones(2)).text()
    finally:
        set_language("en")
    assert english.splitlines()[0] == (
        "autograd graph: 6 nodes, 5 edges (3 function, 1 leaf, 1 output, 1 saved)"
    )
    assert chinese.splitlines()[0] == (
        "autograd 计算图：6 个节点，5 条边（3 个函数、1 个叶子、1 个输出、1 个保存的张量）"
    )
    assert "├── 保存了 result [3]  <保存的张量>" in chinese
    assert "├── saved result [3]  <saved>" in english
    assert "没有计算图：requires_grad=False" in alone
    assert not re.search(r"\b(nodes|edges|function|leaf|output|saved)\b", chinese)


def test_a_graph_picture_carries_its_text_form_as_its_title():
    graph = show_graph(torch.ones(2, requires_grad=True).exp().sum())
    bundle = graph._repr_mimebundle_()
    svg, text = bundle["image/svg+xml"], bundle["text/plain"]
    root = re.search(r"<svg\b[^>]*>", svg)
    title = re.match(r"<title>([^<]*)</title>", svg[root.end() :])
    assert title and title[1] == text.strip().replace("<", "&lt;").replace(">", "&gt;")
    assert graph_module.svg_titled("<p>no picture</p>", "x") == "<p>no picture</p>"


def test_a_titled_svg_keeps_quotes_as_text_and_escapes_markup():
    from helpers.graph import svg_titled

    svg = '<svg width="10"><g/></svg>'
    titled = svg_titled(svg, ' loss = "per token" <mean> ')
    assert titled == '<svg width="10"><title>loss = "per token" &lt;mean&gt;</title><g/></svg>'
    assert svg_titled("no picture here", "text") == "no picture here"


def test_the_titles_font_is_the_chinese_one_only_in_chinese():
    from helpers.language import set_language

    assert graph_module.title_font() == graph_module.TITLE_FONT
    set_language("zh")
    try:
        assert graph_module.title_font() == graph_module.CHINESE_TITLE_FONT
    finally:
        set_language("en")


class _EngineNode:
    """A backward function of an engine of one's own: only what torch's nodes have."""

    def __init__(self, name, *inputs):
        self._name = name
        self.next_functions = tuple((node, 0) for node in inputs)

    def name(self):
        return self._name


class _EngineTensor:
    """A tensor of an engine of one's own: an array in .data, requires_grad and grad_fn."""

    def __init__(self, data, grad_fn=None, requires_grad=False):
        self.data, self.grad_fn, self.requires_grad = np.asarray(data), grad_fn, requires_grad


def test_a_graph_of_torchs_shape_from_another_engine_draws_as_torchs_does():
    w = torch.tensor([[1.0, 2.0]], requires_grad=True)
    y = (w * 3).sum()
    leaf = _EngineTensor([[1.0, 2.0]], requires_grad=True)
    accumulate = _EngineNode("torch::autograd::AccumulateGrad")
    accumulate.variable = leaf
    mul = _EngineNode("MulBackward0", accumulate, None)
    ours = _EngineTensor(9.0, _EngineNode("SumBackward0", mul), requires_grad=True)
    theirs = show_graph(y, params={"w": w, "y": y})
    drawn = show_graph(ours, params={"w": leaf, "y": ours})
    assert drawn.text() == theirs.text()
    assert drawn.data.function_names() == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    assert drawn.data.node("n4").label == "w\n[1, 2]"  # the leaf, named, with its array's shape


def test_an_object_without_torchs_shape_is_refused_saying_what_it_lacks():
    class NoFlag:
        grad_fn = None

    with pytest.raises(TypeError) as no_flag:
        show_graph(NoFlag())
    assert "without requires_grad: a tensor of your own engine needs grad_fn and" in str(
        no_flag.value
    )

    class Nameless:
        next_functions = ()

    with pytest.raises(TypeError) as nameless:
        show_graph(_EngineTensor(1.0, Nameless(), True))
    assert str(nameless.value) == (
        "a grad_fn in this graph is a Nameless without name: a backward function needs "
        "next_functions, a tuple of (node, index) pairs, and name(), as torch's have"
    )
    deep = _EngineTensor(1.0, _EngineNode("SumBackward0", object()), True)
    with pytest.raises(TypeError, match="is an object without next_functions and name"):
        show_graph(deep)
