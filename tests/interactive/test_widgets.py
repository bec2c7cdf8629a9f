"""helpers.interactive.widgets: the thin ipywidgets over the explorers, the stepper and the lab."""

from pathlib import Path

import pytest

from helpers.interactive.backward_recorder import default_backward_example
from helpers.interactive.explorers import ARRANGEMENTS, LOSSES, optimizer_run
from helpers.interactive.live import VIEW_MIME, WidgetFactory
from helpers.interactive.widgets import backward_stepper, graph_explorer, optimizer_lab

ROOT = Path(__file__).resolve().parents[2]


def moved_counts(run):
    return [sum(step[i] for step in run.moves) for i in range(3)]


LAB_TEXT_SCRIPT = """
from helpers.interactive.widgets import optimizer_lab
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
    assert text.startswith("Optimizer lab: Adam, lr=0.01, one per model, set_to_none=True\n")
    assert "times moved" in text
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
    assert "set_to_none=True, per token loss\n" in text and "token_loss(out, target)" in text
    lab.controls["set_to_none"].value = False
    assert lab.run.loss == LOSSES[1] and "token_loss" in lab.code.value
    default = optimizer_lab()._repr_mimebundle_()["text/plain"]
    assert "per token" not in default and "token_loss" not in default


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
    for name in ("interactive/widgets.py", "interactive/live.py", "quiz.py"):
        source = (ROOT / "helpers" / name).read_text()
        for eight_only in ("tooltip", "TagsInput", "Stack(", "description_allow_html"):
            assert eight_only not in source, (name, eight_only)


#: Labels that are code, the same in every edition: an optimizer's class, an argument.
CODE_LABELS = {"SGD", "Adam", "lr", "zero_grad(set_to_none=True)", "backward(retain_graph=True)"}


def shown_labels(widget) -> list[str]:
    """Every label a widget's controls show: descriptions and the options' labels."""
    controls = getattr(widget, "controls", None) or {"slider": widget.slider, "r": widget.retain}
    labels = []
    for control in controls.values():
        labels += [control.description] if control.description else []
        labels += list(getattr(control, "_options_labels", ()))
    return labels


@pytest.fixture
def chinese():
    from helpers.language import set_language

    set_language("zh")
    yield
    set_language("en")


def test_in_the_chinese_edition_no_control_of_a_widget_is_labelled_in_english(chinese):
    import re

    widgets = [graph_explorer(), backward_stepper(), optimizer_lab(loss=LOSSES[1])]
    english = [
        label
        for w in widgets
        for label in shown_labels(w)
        if label not in CODE_LABELS and not re.search(r"[\u4e00-\u9fff]", label)
    ]
    assert english == []
    lab = widgets[2]
    # The lab's header and its heatmaps' title say the setting in Chinese, around the code's words
    for title in (repr(lab).splitlines()[0], lab.run.figure_title()):
        words = re.sub(r"\w+=\w+|SGD|Adam|\d", "", title)
        assert not re.search(r"[A-Za-z]{2,}", words), title


def test_the_explorers_share_one_scaffold():
    """The controls' wiring, the outer box and the snapshot are written once, in `Explorer`: the
    graph explorer, the stepper and the lab only make their controls and panes and say how to
    lay them out and what their first state shows."""
    import inspect

    from helpers.interactive import widgets

    for cls in (widgets.GraphExplorer, widgets.BackwardStepper, widgets.OptimizerLab):
        assert issubclass(cls, widgets.Explorer), cls
        assert cls.box_class.startswith("autograd-"), cls  # the browser test finds it by it
    source = inspect.getsource(widgets)
    assert source.count(".observe(") == 1 and source.count("snapshot_svg(") == 1
    stepper = backward_stepper()
    assert stepper.settings() == {"step": 0, "retain_graph": False}
    stepper.controls["step"].value = 2
    assert stepper.frame.caption.startswith("Step 2")
