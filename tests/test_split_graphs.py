"""Notebook 06's pictures (helpers/split_graphs.py): the three stage graphs of a split step, their
hand-offs, the joint graph with its cuts marked, and their text without `dot`, in both languages."""

import pytest
import torch

from helpers import graph as graph_module
from helpers.graph import show_graph
from helpers.split import POST_SEED, build_models, joint_step, post_tensors, run_split
from helpers.split_graphs import split_graphs
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)


def fresh(seed=POST_SEED, dims=(10, 6, 6, 3)):
    return build_models(seed, dims)


def graphs():
    tokens, label = post_tensors()
    m, j = fresh(), fresh()
    return split_graphs(run_split(m, tokens, label), m, joint_step(j, tokens, label), j)


def test_split_graphs_are_the_joint_graph_cut_in_three():
    g = graphs()
    assert [title.split(" ·")[0] for title, _, _ in g.stages] == ["stage 1", "stage 2", "stage 3"]
    functions = [len(data.function_names()) for _, data, _ in g.stages]
    assert sum(functions) == len(g.joint.function_names()) + 2
    for _, data, _ in g.stages:
        assert len(data.edges) == len(set(data.edges))  # no edge twice
        assert "view_base" not in data.kinds()
    assert "ff1 [1, 5, 6]  <leaf>" in g.text() and "model1.embed.weight" in g.text()


def test_split_graphs_draw_the_handoffs_and_mark_the_cuts():
    g = graphs()
    source = g.dot.source
    assert "ff1.grad" in source and "f2's values" in source
    assert "= f1: cut 1" in source and "= f2: cut 2" in source
    assert repr(g) == g.text()
    bundle = g._repr_mimebundle_()
    assert bundle["text/plain"] == g.text()
    if "image/svg+xml" in bundle:
        assert bundle["image/svg+xml"].lstrip().startswith("<?xml")


@pytest.fixture
def no_dot(tmp_path, monkeypatch):
    """No `dot` anywhere, as on a learner's machine without graphviz: PATH is an empty folder."""
    cached = graph_module.dot_available
    monkeypatch.setenv("PATH", str(tmp_path))
    cached.cache_clear()  # whoever asks, by whatever name, finds no `dot`
    yield
    cached.cache_clear()  # and asks again once PATH is back


def test_split_graphs_without_dot_show_their_text_and_what_to_install(no_dot):
    """The same fallback as show_graph's (helpers.graph.picture_bundle), not a copy of it."""
    g = graphs()
    bundle = g._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    text = bundle["text/plain"]
    assert text == graph_module.missing_dot_message() + "\n\n" + g.text()
    assert "sudo apt-get install graphviz" in text and "brew install graphviz" in text
    for part in ("stage 1 · client", "stage 2 · middle", "stage 3 · label holder", "joint run"):
        assert part in text
    assert "ff1 [1, 5, 6]  <leaf>" in text and "NllLoss2DBackward0" in text
    y = torch.ones(2, requires_grad=True).sum()
    assert show_graph(y)._repr_mimebundle_()["text/plain"].startswith(text.split("\n\n")[0])


def test_split_graphs_when_dot_vanishes_show_the_same_advice(monkeypatch, no_dot):
    g = graphs()
    monkeypatch.setattr(graph_module, "dot_available", lambda: True)  # found at first, but gone
    assert g._repr_mimebundle_() == {
        "text/plain": graph_module.missing_dot_message() + "\n\n" + g.text()
    }


def test_split_graphs_text_is_deterministic():
    assert graphs().text() == graphs().text()
    assert graphs().dot.source == graphs().dot.source


def test_each_stage_is_drawn_in_its_box_with_every_node_and_arrow():
    g = graphs()
    source = g.dot.source
    roots = {}
    for k, (title, data, _) in enumerate(g.stages, start=1):
        assert f"subgraph cluster_s{k} {{" in source and f'label="{title}"' in source
        for n in data.nodes:
            assert f"\ts{k}_{n.id} [label=" in source  # each node, labelled, in its stage's box
        for e in data.edges:
            if e.style == "flow":
                assert f"\ts{k}_{e.src} -> s{k}_{e.dst}\n" in source
        roots[k] = f"s{k}_{data.roots[0]}"
    cuts = [
        next(n.id for n in g.stages[k][1].nodes if n.label.startswith(name))
        for k, name in ((1, "ff1"), (2, "ff2"))
    ]
    assert f"{roots[1]} -> s2_{cuts[0]} [label=" in source
    assert f"{roots[2]} -> s3_{cuts[1]} [label=" in source
    assert "↓ f1's values" in source and "↑ ff2.grad" in source
    assert "subgraph cluster_j {" in source
    assert 'label="joint run: no cuts, one loss.backward()"' in source


def test_split_graphs_speak_the_twin_s_language():
    from helpers.language import set_language

    set_language("zh")
    try:
        g = graphs()
        source, text = g.dot.source, g.text()
    finally:
        set_language("en")
    titles = ("阶段 1 · 客户端：模型 1", "阶段 2 · 中间方：模型 2", "阶段 3 · 标签持有方：模型 3")
    for title in titles:
        assert f'label="{title}"' in source and title in text
    assert "↓ f1 的值" in source and "= f2：切口 2" in source
    assert 'label="联合运行：没有切口，一次 loss.backward()"' in source
    assert "\n\n联合运行\n" in text
    assert not any(w in source + text for w in ("stage", "values", "joint", "cut "))


def test_the_text_names_each_stages_tensors_and_the_joint_loss():
    sections = graphs().text().split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "stage 1 · client: model 1",
        "stage 2 · middle party: model 2",
        "stage 3 · label holder: model 3",
        "joint run",
    ]
    assert sections[0].splitlines()[2] == "f1 [1, 5, 6]  <output>"
    assert sections[1].splitlines()[2] == "f2 [1, 5, 6]  <output>"
    assert "ff1 [1, 5, 6]  <leaf>" in sections[1]
    assert sections[2].splitlines()[2] == "loss scalar  <output>"
    assert "ff2 [1, 5, 6]  <leaf>" in sections[2]
    assert sections[3].splitlines()[2] == "loss scalar  <output>"


def test_split_graphs_without_the_joint_run_show_the_three_stages_only():
    tokens, label = post_tensors()
    m = fresh()
    g = split_graphs(run_split(m, tokens, label), m)
    assert g.joint is None and "joint run" not in g.text() and "cluster_j" not in g.dot.source
    assert len(g.text().split("\n\n")) == 3


def test_split_graphs_in_chinese_name_a_simplified_chinese_face():
    """A Chinese word in a node ("标量") or a title is drawn in a Simplified Chinese face, never
    in the browser's fallback for bare monospace (a Japanese one)."""
    from helpers.language import set_language

    english = graphs().dot.source
    set_language("zh")
    try:
        chinese = graphs().dot.source
    finally:
        set_language("en")
    assert f'fontname="{graph_module.CHINESE_NODE_FONT}"' in chinese
    assert f'fontname="{graph_module.CHINESE_TITLE_FONT}"' in chinese
    assert "CJK" not in english
