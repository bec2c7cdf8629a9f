"""helpers.widget_logic (what the explorers compute) and helpers.widgets (the thin widgets)."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from helpers import widget_logic as logic
from helpers.widget_logic import (
    ARRANGEMENTS,
    LOSSES,
    backward_frame,
    compact_png,
    default_backward_example,
    explore_graph,
    explorer_code,
    optimizer_code,
    optimizer_run,
    record_backward,
    snapshot_svg,
)
from helpers.widgets import (
    VIEW_MIME,
    WidgetFactory,
    backward_stepper,
    graph_explorer,
    optimizer_lab,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ORDER = [
    ("SumBackward0", "loss"),
    ("PowBackward0", ""),
    ("AddBackward0", "h"),
    ("AccumulateGrad", "b"),
    ("MulBackward0", ""),
    ("AccumulateGrad", "w"),
]


# ---- graph explorer logic ------------------------------------------------------------------


def test_explorer_code_follows_the_toggles():
    plain = explorer_code(False, False, False)
    assert "detach" not in plain and "retain_grad" not in plain
    assert "x = torch.tensor([1.0, 2.0, 3.0])  # the input" in plain
    every = explorer_code(True, True, True)
    assert "h_cut = h.detach()" in every and "h.retain_grad()" in every
    assert "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)" in every


def test_no_cut_sends_gradients_to_both_models():
    result = explore_graph()
    t = result.tensors
    torch.testing.assert_close(t["w1"].grad, t["x"] * t["w2"])
    torch.testing.assert_close(t["w2"].grad, t["h"])
    assert t["x"].grad is None and "h_cut" not in t
    assert result.table.row("h")["grad_fn"] == "MulBackward0"


def test_input_requires_grad_gives_the_input_a_gradient():
    t = explore_graph(input_requires_grad=True).tensors
    torch.testing.assert_close(t["x"].grad, t["w1"] * t["w2"])


def test_retain_grad_keeps_the_intermediate_gradient_unless_cut():
    kept = explore_graph(retain_grad=True).tensors
    torch.testing.assert_close(kept["h"].grad, kept["w2"])
    cut = explore_graph(detach=True, retain_grad=True).tensors
    assert cut["h"].retains_grad and cut["h"].grad is None


def test_the_cut_stops_model_one_and_shares_storage():
    result = explore_graph(detach=True, input_requires_grad=True)
    t = result.tensors
    assert t["w1"].grad is None and t["x"].grad is None and t["w2"].grad is not None
    assert result.table.row("h_cut")["shares storage with"] == "h"
    assert not t["h_cut"].requires_grad and t["h_cut"].is_leaf


def test_explorer_graph_has_no_repeated_edges():
    data = explore_graph().graph.data
    assert len(data.edges) == len(set(data.edges))
    assert data.function_names().count("MulBackward0") == 2


# ---- backward stepper logic ------------------------------------------------------------------


def default_record(retain_graph=False):
    root, params = default_backward_example()
    return record_backward(root, params, retain_graph=retain_graph)


def test_recorded_order_is_the_engines():
    record = default_record()
    assert [(s.name, s.gradient_of) for s in record.steps] == DEFAULT_ORDER
    assert [s.received for s in record.steps] == [
        "[1]",
        "[1, 1, 1]",
        "[3, -2, 14]",
        "[15]",
        "[3, -2, 14]",
        "[3, -4, 42]",
    ]
    assert [s.index for s in record.steps] == list(range(1, 7))


def test_recorded_order_runs_every_node_after_all_its_consumers():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.ones(2, 3, requires_grad=True)
    loss = (net(x) * net(x)).sum()  # the network used twice: nodes with several consumers
    record = record_backward(loss, {"x": x})
    position = {s.node_id: s.index for s in record.steps}
    assert len(position) == len(record.steps) == record.data.kinds()["function"]
    for edge in record.data.edges:
        if edge.style == "flow" and edge.src in position and edge.dst in position:
            assert position[edge.dst] < position[edge.src], edge  # consumer first


def test_saved_tensors_are_freed_as_the_pass_goes_unless_retained():
    record = default_record()
    pow_id, mul_id = record.steps[1].node_id, record.steps[4].node_id
    assert record.steps[1].freed_before == frozenset()
    assert record.steps[2].freed_before == {pow_id}  # PowBackward0 ran, its saved h is gone
    assert record.freed_after == {pow_id, mul_id}
    assert record.second_backward.startswith("raises RuntimeError: Trying to backward")
    kept = default_record(retain_graph=True)
    assert kept.freed_after == frozenset()
    assert kept.second_backward.startswith("runs")


def test_a_graph_that_saved_nothing_can_run_backward_twice():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    record = record_backward((x + 1).sum(), {"x": x})
    assert record.freed_after == frozenset() and record.second_backward.startswith("runs")
    assert "saved no tensors" in backward_frame(record, len(record.steps) + 1).caption


def test_hooks_are_removed_after_recording():
    root, params = default_backward_example()
    record = record_backward(root, params, retain_graph=True)
    assert record.second_backward.startswith("runs")  # a second pass ran after the recording
    assert len(record.steps) == 6  # and no hook added to the record
    assert params["w"].grad.tolist() == [6.0, -8.0, 84.0]  # two passes accumulated


def test_frames_walk_the_record():
    record = default_record()
    first = backward_frame(record, 0)
    assert first.caption.startswith("Before backward(): 6 backward functions")
    assert first.table.column("status") == ["waiting"] * 6
    assert "color=red" not in first.graph.source

    third = backward_frame(record, 3)
    assert third.caption == (
        "Step 3 of 6: the engine runs AddBackward0; it received [3, -2, 14] (the gradient of h)."
    )
    assert third.table.column("status") == ["done", "done", "running"] + ["waiting"] * 3
    assert third.table.column("gradient received")[3:] == ["?", "?", "?"]
    assert f"{record.steps[2].node_id} [label=AddBackward0 color=red" in third.graph.source
    assert third.graph.data.kinds().get("freed") == 1  # PowBackward0's saved h

    fifth = backward_frame(record, 5)
    assert "grad = [15]" in fifth.graph.text()  # b's AccumulateGrad ran at step 4
    assert "grad = [3, -4, 42]" not in fifth.graph.text()

    last = backward_frame(record, 7)
    assert last.caption.startswith(
        "After backward(): all 6 steps ran; the saved tensors were freed"
    )
    assert last.graph.data.kinds().get("freed") == 2
    assert "grad = [3, -4, 42]" in last.graph.text()
    kept = backward_frame(default_record(retain_graph=True), 7)
    assert "kept (retain_graph=True)" in kept.caption
    assert "freed" not in kept.graph.data.kinds()


def test_frame_position_out_of_range_says_the_range():
    with pytest.raises(ValueError, match="between 0 and 7"):
        backward_frame(default_record(), 8)


# ---- optimizer lab logic ---------------------------------------------------------------------


def moved_counts(run):
    return [sum(step[i] for step in run.moves) for i in range(3)]


def test_one_optimizer_per_model_moves_each_model_once():
    for name in logic.OPTIMIZERS:
        run = optimizer_run(name, 0.01, set_to_none=False, arrangement=ARRANGEMENTS[0])
        assert run.moves == [[False, False, True], [False, True, False], [True, False, False]]
        assert run.same_as_per_model == [True, True, True]
        weights = [name for name in run.diff.column("parameter") if name.endswith("weight")]
        assert set(weights) <= set(run.diff.changed)
        assert run.diff["model1.embed.weight"].n_changed == 30  # 5 of 10 rows: the tokens used


@pytest.mark.parametrize(
    ("optimizer", "set_to_none", "counts"),
    [
        ("Adam", False, [1, 2, 3]),
        ("SGD with momentum", False, [1, 2, 3]),
        ("SGD", False, [1, 1, 1]),  # p -= lr * 0 does nothing
        ("Adam", True, [1, 1, 1]),  # .grad None: skipped
    ],
)
def test_one_optimizer_for_all_three(optimizer, set_to_none, counts):
    run = optimizer_run(optimizer, 0.01, set_to_none=set_to_none, arrangement=ARRANGEMENTS[1])
    assert moved_counts(run) == counts
    assert run.same_as_per_model == [c == 1 for c in counts]
    table = run.moves_table()
    assert table.row("times moved") == {
        "step() after": "times moved",
        **{f"model{i}": str(c) for i, c in enumerate(counts, start=1)},
    }


@pytest.mark.parametrize(
    ("optimizer", "set_to_none", "counts"),
    [("Adam", False, [1, 2, 3]), ("SGD", False, [1, 1, 1]), ("Adam", True, [1, 1, 1])],
)
def test_one_optimizer_for_all_three_with_the_per_token_loss(optimizer, set_to_none, counts):
    run = optimizer_run(optimizer, 0.01, set_to_none, ARRANGEMENTS[1], loss=LOSSES[1])
    assert run.loss == "per token"
    assert moved_counts(run) == counts
    assert run.same_as_per_model == [c == 1 for c in counts]


def test_per_token_loss_moves_every_parameter_biases_included():
    run = optimizer_run("Adam", 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1])
    assert run.diff.unchanged == []  # with the post's loss the biases' moves are CPU noise
    assert run.diff["model1.embed.weight"].n_changed == 30
    assert max(float(run.diff[name].max_abs) for name in run.diff.changed) == pytest.approx(
        0.01, rel=1e-3
    )
    post = optimizer_run("Adam", 0.01, True, ARRANGEMENTS[0])
    assert post.loss == LOSSES[0] == "the post's"
    assert not torch.equal(post.after["model3.layer.weight"], run.after["model3.layer.weight"])


def test_optimizer_code_shows_the_per_token_loss_only_when_chosen():
    plain = optimizer_code("Adam", 0.01, True, ARRANGEMENTS[0])
    assert "token_loss" not in plain and "out, loss = models.model3(ff2, label)" in plain
    assert plain == optimizer_code("Adam", 0.01, True, ARRANGEMENTS[0], LOSSES[0])
    token = optimizer_code("Adam", 0.01, True, ARRANGEMENTS[0], LOSSES[1])
    assert "loss = token_loss(out, target)" in token and "label" not in token
    same_start, same_end = plain.splitlines()[:5], plain.splitlines()[-10:]
    assert token.splitlines()[:5] == same_start and token.splitlines()[-10:] == same_end
    with pytest.raises(ValueError, match="choose one of the post's, per token"):
        optimizer_code("Adam", 0.01, True, ARRANGEMENTS[0], "sum")


def test_optimizer_code_is_the_whole_step_one_statement_a_line():
    code = optimizer_code("Adam", 0.01, True, ARRANGEMENTS[0], LOSSES[1])
    lines = code.splitlines()
    assert lines[0].startswith("models = build_models(seed=42)")
    assert "ff1 = f1.clone().detach().requires_grad_(True)  # cut 1" in lines
    assert lines[-9:] == [
        "opts[2].zero_grad(set_to_none=True)",
        "loss.backward()",
        "opts[2].step()",
        "opts[1].zero_grad(set_to_none=True)",
        "f2.backward(ff2.grad)",
        "opts[1].step()",
        "opts[0].zero_grad(set_to_none=True)",
        "f1.backward(ff1.grad)",
        "opts[0].step()",
    ]
    for line in lines:
        compile(line, "<line>", "exec")  # each line stands alone: the lab runs them one by one


def test_optimizer_run_runs_the_code_it_shows(monkeypatch):
    run = optimizer_run("SGD", 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1])
    assert run.code == optimizer_code("SGD", 0.01, True, ARRANGEMENTS[0], LOSSES[1])
    from helpers.split import POST_INPUT, TOKEN_TARGET, build_models, token_loss

    namespace = {
        "torch": torch,
        "build_models": build_models,
        "token_loss": token_loss,
        "tokens": torch.tensor(POST_INPUT),
        "target": torch.tensor(TOKEN_TARGET),
    }
    with torch.random.fork_rng(devices=[]):
        exec(run.code, namespace)  # the shown code, run by hand, ends where the lab's run did
    for name, p in namespace["models"].named_parameters().items():
        assert torch.equal(p.detach(), run.after[name]), name
    # Change the code the lab shows: the run follows it (here model 2's step() is dropped).
    shown = run.code.replace("opts[1].step()\n", "")
    monkeypatch.setattr(logic, "optimizer_code", lambda *args: shown)
    edited = optimizer_run("SGD", 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1])
    assert edited.code == shown and len(edited.moves) == 2
    assert [c.name for c in edited.diff.changes if not c.changed] == [
        "model2.layer.weight",
        "model2.layer.bias",
    ]


def test_moved_table_says_which_parameters_moved_and_how_far():
    run = optimizer_run("Adam", 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1])
    table = run.moved_table()
    assert table.columns == ["parameter", "elements moved", "max |Δ|"]
    assert table.row("model1.embed.weight")["elements moved"] == "30 / 60"  # 5 tokens of 10
    assert table.column("max |Δ|") == ["0.01"] * 7  # Adam's first step: lr
    assert table.note == "7 of 7 parameters moved"
    sgd = optimizer_run("SGD", 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1]).moved_table()
    for name, change in zip(sgd.column("parameter"), sgd.column("max |Δ|"), strict=True):
        assert change == f"{run_diff_max(name, 'SGD'):.2g}"  # SGD: lr * |grad|, from the run
    assert sgd.column("max |Δ|") != table.column("max |Δ|")
    shared = optimizer_run("Adam", 0.01, False, ARRANGEMENTS[1], loss=LOSSES[1]).moved_table()
    assert shared.column("max |Δ|")[:3] == ["0.01"] * 3  # model 1: one step
    assert all(float(v) > 0.015 for v in shared.column("max |Δ|")[3:])  # models 2, 3: more steps


def run_diff_max(name, optimizer):
    run = optimizer_run(optimizer, 0.01, True, ARRANGEMENTS[0], loss=LOSSES[1])
    return float((run.after[name] - run.before[name]).abs().max())


def test_moved_table_leaves_out_what_is_rounding_noise():
    run = optimizer_run("Adam", 0.01, True, ARRANGEMENTS[0])  # the post's loss
    assert run.noise() == ["model1.layer.bias", "model2.layer.bias", "model3.layer.bias"]
    table = run.moved_table()
    for name in run.noise():
        row = table.row(name)
        assert row["elements moved"] == row["max |Δ|"] == "?" and "noise" in row["note"]
    assert table.row("model3.layer.weight") == {
        "parameter": "model3.layer.weight",
        "elements moved": "18 / 18",
        "max |Δ|": "0.01",
        "note": "",
    }
    assert table.note == "4 of 4 parameters moved; 3 more had only a noise gradient"


LAB_TEXT_SCRIPT = """
from helpers.widgets import optimizer_lab
print(optimizer_lab()._repr_mimebundle_()["text/plain"])
print(optimizer_lab(loss="per token")._repr_mimebundle_()["text/plain"])
"""


def test_lab_text_does_not_depend_on_the_cpu_kernels():
    # What nbval compares: the same under plain C++ kernels as under the vectorised ones.
    import os
    import subprocess
    import sys

    texts = [
        subprocess.run(
            [sys.executable, "-c", LAB_TEXT_SCRIPT],
            env={**os.environ, "ATEN_CPU_CAPABILITY": capability},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for capability in ("default", "avx2")
    ]
    assert texts[0] == texts[1] and "rounding noise" in texts[0]


def test_optimizer_run_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    optimizer_run()
    assert torch.equal(state, torch.get_rng_state())


def test_optimizer_run_rejects_unknown_choices():
    with pytest.raises(ValueError, match="choose one of SGD, SGD with momentum, Adam"):
        optimizer_run("RMSprop")
    with pytest.raises(ValueError, match="choose one of one per model"):
        optimizer_run(arrangement="two")
    with pytest.raises(ValueError, match="unknown loss 'mean'"):
        optimizer_run(loss="mean")


def test_optimizer_code_shows_the_setting():
    per_model = optimizer_code("SGD with momentum", 0.1, True, ARRANGEMENTS[0])
    assert (
        "opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models.as_list()]"
        in per_model
    )
    assert per_model.count("zero_grad(set_to_none=True)") == 3
    shared = optimizer_code("Adam", 0.001, False, ARRANGEMENTS[1])
    assert "params = [p for m in models.as_list() for p in m.parameters()]" in shared
    assert "opt = torch.optim.Adam(params, lr=0.001)  # one for all three" in shared
    assert shared.count("opt.zero_grad(set_to_none=False)") == 3


# ---- static snapshots ------------------------------------------------------------------------


def test_snapshot_svg_is_one_valid_picture_with_the_text():
    result = explore_graph(detach=True)
    svg = snapshot_svg(result.code, result.graph, result.table, title="a title")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    texts = "".join(root.itertext())
    assert "a title" in texts and "h_cut = h.detach()" in texts and "shares storage with" in texts
    assert svg == snapshot_svg(result.code, result.graph, result.table, title="a title")


def test_snapshot_svg_embeds_figures_and_rejects_other_things():
    run = optimizer_run()
    svg = snapshot_svg(run.figure(), run.moves_table())
    assert "data:image/png;base64," in svg
    ET.fromstring(svg)
    with pytest.raises(TypeError, match="cannot draw a int"):
        snapshot_svg(3)


def test_compact_png_keeps_the_size_and_shrinks_the_bytes():
    png = optimizer_run().figure().png()
    small = compact_png(png)
    assert small[:8] == b"\x89PNG\r\n\x1a\n" and small[16:24] == png[16:24]
    assert len(small) < len(png) / 2


def test_without_dot_the_pictures_fall_back_to_text(monkeypatch):
    monkeypatch.setattr(logic, "dot_available", lambda: False)
    result = explore_graph()
    assert logic.graph_html(result.graph).startswith("<pre")
    svg = snapshot_svg(result.graph)
    assert "autograd graph:" in "".join(ET.fromstring(svg).itertext())


# ---- the widgets -----------------------------------------------------------------------------


def test_graph_explorer_bundle_has_widget_picture_and_text(capsys):
    explorer = graph_explorer()
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {VIEW_MIME, "image/svg+xml", "text/plain"}
    assert bundle[VIEW_MIME]["model_id"] == explorer.widget.model_id
    assert bundle[VIEW_MIME]["version_major"] == 2
    assert bundle["text/plain"].startswith("Graph explorer: detach=False")
    assert "autograd graph:" in bundle["text/plain"]
    assert capsys.readouterr().out == ""  # displaying prints nothing (nothing for nbval)
    assert "autograd-graph-explorer" in explorer.widget._dom_classes


def test_graph_explorer_toggles_redraw():
    explorer = graph_explorer()
    before = (explorer.picture.value, explorer.code.value, explorer.table.value)
    explorer.controls["detach"].value = True
    assert explorer.settings() == {
        "detach": True,
        "input_requires_grad": False,
        "retain_grad": False,
    }
    assert "h_cut = h.detach()" in explorer.code.value
    assert explorer.picture.value != before[0] and explorer.table.value != before[2]
    assert explorer.result.tensors["w1"].grad is None
    # the static snapshot stays the initial state
    assert "h_cut" not in explorer._repr_mimebundle_()["text/plain"]


def test_two_explorers_give_the_same_static_snapshot():
    first, second = graph_explorer(retain_grad=True), graph_explorer(retain_grad=True)
    a, b = first._repr_mimebundle_(), second._repr_mimebundle_()
    assert a["text/plain"] == b["text/plain"] and a["image/svg+xml"] == b["image/svg+xml"]
    assert a[VIEW_MIME] != b[VIEW_MIME]


def test_backward_stepper_slider_and_toggle():
    calls = []

    def build():
        calls.append(1)
        return default_backward_example()

    stepper = backward_stepper(build)
    assert stepper.slider.min == 0 and stepper.slider.max == 7 and stepper.slider.value == 0
    start = stepper.picture.value
    stepper.slider.value = 1
    assert stepper.picture.value != start
    assert "Step 1 of 6: the engine runs SumBackward0" in stepper.caption.value
    stepper.slider.value = 7
    assert "the saved tensors were freed" in stepper.caption.value
    stepper.retain.value = True
    assert "kept (retain_graph=True)" in stepper.caption.value
    stepper.retain.value = False
    stepper.slider.value = 0
    assert len(calls) == 2  # one recorded pass per retain_graph setting, then cached
    assert stepper.picture.value == start
    text = stepper._repr_mimebundle_()["text/plain"]
    assert text.startswith("Backward stepper at step 0 (retain_graph=False)")


def test_optimizer_lab_controls_rerun_the_step():
    lab = optimizer_lab()
    assert "same as one optimizer per model?" in lab.moves.value
    picture = lab.picture.value
    lab.controls["arrangement"].value = ARRANGEMENTS[1]
    lab.controls["set_to_none"].value = False
    assert moved_counts(lab.run) == [1, 2, 3]
    assert lab.picture.value != picture
    assert "opt.zero_grad(set_to_none=False)" in lab.code.value
    lab.controls["lr"].value = 0.1
    assert lab.run.lr == pytest.approx(0.1)
    text = lab._repr_mimebundle_()["text/plain"]
    assert "arrangement='one per model'" in text and "times moved" in text
    # The compared text carries the initial run's code and its tables, computed, not a placeholder.
    first = optimizer_run()
    assert first.code in text and repr(first.moved_table()) in text and "[figure" not in text
    # The post's loss gives the biases gradients that are rounding noise (about 1e-8): their
    # changes differ between CPUs, so the text gives them no numbers.
    bias = next(line for line in text.splitlines() if line.startswith("model1.layer.bias"))
    assert "rounding noise" in bias and not any(ch.isdigit() for ch in bias.split("bias")[1][:30])


def test_optimizer_lab_with_the_per_token_loss_keeps_it_across_updates():
    lab = optimizer_lab(loss=LOSSES[1])
    assert lab.run.loss == LOSSES[1] and "token_loss" in lab.code.value
    text = lab._repr_mimebundle_()["text/plain"]
    assert "loss='per token'" in text and "token_loss(out, target)" in text
    lab.controls["set_to_none"].value = False
    assert lab.run.loss == LOSSES[1] and "token_loss" in lab.code.value
    default = optimizer_lab()._repr_mimebundle_()["text/plain"]
    assert "loss=" not in default and "token_loss" not in default


def test_optimizer_lab_text_follows_the_run_it_shows():
    per_model = optimizer_lab(loss=LOSSES[1])._repr_mimebundle_()["text/plain"]
    shared = optimizer_lab("Adam", 0.01, False, ARRANGEMENTS[1], LOSSES[1])
    text = shared._repr_mimebundle_()["text/plain"]
    assert "7 of 7 parameters moved" in per_model and "7 of 7 parameters moved" in text
    row = next(line for line in text.splitlines() if line.startswith("model3.layer.weight"))
    assert row.split()[-1] == shared.run.moved_table().row("model3.layer.weight")["max |Δ|"]
    assert row.split()[-1] != "0.01"  # three Adam steps: further than one
    assert "opt.step()" in text and "opts[2].step()" in per_model


def test_widget_factory_shares_layouts_and_styles():
    make = WidgetFactory()
    a, b = make("HTML", value="a"), make("HTML", value="b")
    assert a.layout is b.layout and a.style is b.style
    c1, c2 = make.checkbox("one", True), make.checkbox("two", False)
    assert c1.layout is c2.layout and c1.style is c2.style
    assert c1.style.description_width == "initial"
    assert make.row([a]).layout is make.row([b]).layout


def test_only_the_ipywidgets_api_common_to_7_and_8():
    for name in ("widgets.py", "quiz.py"):
        source = (ROOT / "helpers" / name).read_text()
        for eight_only in ("tooltip", "TagsInput", "Stack(", "description_allow_html"):
            assert eight_only not in source, (name, eight_only)
