"""Every reproducer of tests/explain/reproducers/ (one learner's mistake each, the causal line
marked `# cause`) is named by its family, with that line; where the explanation suggests an edit,
the edited program runs and gives the gradients torch gives for the right program."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
from torch import nn

from helpers import explain
from helpers.explain import catalogue
from tests.support.mutation import text_outside_mutmut

HERE = Path(__file__).parent / "reproducers"
#: A reentrant checkpoint warns before it fails (checkpoint_frozen_input): the warning, as a
#: learner sees it, is not the error to explain.
pytestmark = pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad:UserWarning")

#: reproducer -> its family
FAMILY = {
    "activation_changed": "inplace_saved",
    "slice_assigned": "inplace_saved",
    "augmented_assignment": "inplace_saved",
    "step_between": "inplace_saved",
    "state_kept_by_retain_graph": "inplace_saved",
    "view_of_changed_base": "inplace_saved",
    "hidden_state": "backward_twice",
    "target_before_loop": "backward_twice",
    "state_unpacked": "backward_twice",
    "feature_of_trained_weights": "backward_twice",
    "two_losses": "backward_twice",
    "beside_a_no_grad_view": "backward_twice",
    "item_cut": "no_graph",
    "no_grad_loss": "no_graph",
    "inference_step": "no_graph",
    "argmax_cut": "no_graph",
    "leaf_update": "leaf_inplace",
    "vector_backward": "scalar_output",
    "loss_per_sample": "scalar_output",
    "numpy_of_output": "numpy_requires_grad",
    "numpy_beside_data": "numpy_requires_grad",
    "running_total": "numpy_requires_grad",
    "hook_on_input": "hook_no_grad",
    "integer_requires_grad": "requires_grad_dtype",
    "flag_on_result": "requires_grad_nonleaf",
    "unused_input": "unused_input",
    "inference_saved": "inference_saved",
    "split_view_changed": "view_inplace",
    "no_grad_view_changed": "view_no_grad_inplace",
    "function_shape": "function_gradient_shape",
    "function_count": "function_gradient_count",
    "sent_to_process": "share_nonleaf",
    "checkpoint_under_ddp": "ddp_ready_twice",
    "checkpoint_frozen_input": "no_graph",
}


def _right_sigmoid_squared():
    torch.manual_seed(0)
    x = torch.randn(3)
    s = x.sigmoid()
    return {"x": 2 * s * s * (1 - s)}  # d/dx sigmoid(x)^2


def _right_exp():
    torch.manual_seed(0)
    x = torch.randn(4)
    grad = 3 * x.exp()  # 2·e from total, 1·e from e.sum() (the copy's first entry set to 0)
    grad[0] = 2 * x[0].exp()
    return {"x": grad}


def _right_square_of_double():
    torch.manual_seed(0)
    w = torch.randn(3)
    return {"w": 8 * w}  # d/dw (2w)^2


def _right_hidden_state():
    """Truncated backpropagation, one step back: each step's loss reaches w through this step."""
    torch.manual_seed(0)
    w = torch.randn(3, 3, requires_grad=True)
    h, total = torch.zeros(3), torch.zeros(3, 3)
    for _ in range(3):
        x = torch.randn(3)
        h = torch.tanh(w @ h.detach() + x)
        total += torch.autograd.grad(h.pow(2).sum(), w)[0]
    return {"w": total}


def _right_target_before_loop():
    """The target is data: no graph kept from it, so w follows plain gradient descent."""
    torch.manual_seed(0)
    target, w = torch.randn(3).exp(), torch.zeros(3)
    for _ in range(2):
        w = w - 0.1 * 2 * (w - target)
    return {"w": w}


def _right_state_unpacked():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4)
    batches = [torch.randn(5, 2, 3) for _ in range(2)]
    h, c = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    for x in batches:
        out, (h, c) = lstm(x, (h.detach(), c.detach()))
        out.pow(2).mean().backward()
    return {"w": lstm.weight_ih_l0.grad}


def _right_state_kept_by_retain_graph():
    torch.manual_seed(0)
    w = torch.randn(3, 3, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)
    h = torch.zeros(3)
    for _ in range(3):
        optimizer.zero_grad()
        h = torch.tanh(w @ h.detach() + torch.randn(3))
        h.pow(2).sum().backward()
        optimizer.step()
    return {"w": w.grad}


def _right_view_of_changed_base():
    """The rows written later change no value `out` uses: the gradient without them."""
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(4)
    ((x @ w) @ w).sum().backward()
    return {"w": w.grad}


def _right_leaf_update():
    torch.manual_seed(0)
    w = torch.randn(3)
    return {"w": w - 0.1 * 2 * w}


def _right_vector():
    return {"x": torch.full((3,), 2.0)}


def _right_numpy():
    torch.manual_seed(0)
    return {"values": torch.randn(3) * 2}


def _right_running_total():
    torch.manual_seed(0)
    w, total = torch.randn(3), 0.0
    for _ in range(2):
        total += (w * torch.randn(3)).pow(2).sum().item()
    return {"curve": torch.tensor([total])}


def _right_integer():
    return {"steps": torch.full((4,), 2.0)}


def _right_flag():
    torch.manual_seed(0)
    w = torch.randn(3)
    return {"w": 2 * (w - 2 * w)}  # the target held fixed


def _right_checkpointed_block():
    from torch import nn

    torch.manual_seed(0)
    embedding, block = nn.Embedding(10, 4), nn.Linear(4, 4)
    block(embedding(torch.tensor([1, 2, 3])).detach()).pow(2).sum().backward()
    return {"weight": block.weight.grad, "bias": block.bias.grad}


#: reproducer -> the gradients of the right program (where the fix is an edit)
RIGHT = {
    "activation_changed": _right_sigmoid_squared,
    "slice_assigned": _right_exp,
    "augmented_assignment": _right_square_of_double,
    "hidden_state": _right_hidden_state,
    "target_before_loop": _right_target_before_loop,
    "state_unpacked": _right_state_unpacked,
    "state_kept_by_retain_graph": _right_state_kept_by_retain_graph,
    "view_of_changed_base": _right_view_of_changed_base,
    "leaf_update": _right_leaf_update,
    "vector_backward": _right_vector,
    "numpy_of_output": _right_numpy,
    "numpy_beside_data": _right_numpy,
    "running_total": _right_running_total,
    "integer_requires_grad": _right_integer,
    "flag_on_result": _right_flag,
    "checkpoint_frozen_input": _right_checkpointed_block,
}


def run(path: Path) -> tuple[BaseException | None, dict]:
    """Runs a program with the explainer's watch on; the error it raised, and its globals."""
    watch = explain.Watch()
    scope: dict = {}
    try:
        with watch:
            scope = runpy.run_path(str(path), run_name="__main__")
    except Exception as err:  # the reproducer's own error, to explain
        err.watch = watch
        return err, scope
    return None, scope


def cause_line(path: Path) -> int:
    lines = path.read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("# cause"))


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_each_reproducer_is_named_by_its_family_with_its_causal_line(name):
    path = HERE / f"{name}.py"
    error, _ = run(path)
    assert error is not None, f"{name} raised nothing"
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation is not None, f"{name}: no explanation for {error!r}"
    assert explanation.family == FAMILY[name]
    causal = [p.at.line for p in explanation.places if p.role in CAUSAL_ROLES]
    assert cause_line(path) in causal, explanation.as_text()
    assert str(error).strip() in explanation.as_text()  # torch's words, verbatim


CAUSAL_ROLES = {
    "changed", "freed", "carried", "cut", "grad_off", "unreduced", "kept", "surfaced"
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_the_suggested_edit_runs_and_gives_the_right_gradients(name, tmp_path):
    path = HERE / f"{name}.py"
    error, _ = run(path)
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation.edits, f"{name}: no edit suggested"
    source = path.read_text()
    for edit in explanation.edits:
        source = edit.apply(source)
    fixed = tmp_path / f"{name}.py"
    fixed.write_text(source)
    error, scope = run(fixed)
    assert error is None, f"the fix of {name} still fails: {error}\n{source}"
    for key, value in RIGHT[name]().items():
        torch.testing.assert_close(scope["GRADS"][key], value, msg=f"{name}: {key}")


@pytest.mark.parametrize(
    "fixed",
    [
        ("use_reentrant=True", "use_reentrant=False"),
        ("find_unused_parameters=True", "static_graph=True"),
    ],
)
def test_both_fixes_ddp_is_told_make_the_checkpointed_model_train(fixed, tmp_path):
    """ddp_ready_twice's fix is prose: each of its two ways, applied to the reproducer, runs and
    gives the gradients of the same model without DDP or checkpoints."""
    from torch import nn

    source = (HERE / "checkpoint_under_ddp.py").read_text()
    assert fixed[0] in source
    program = tmp_path / "fixed.py"
    program.write_text(source.replace(fixed[0], fixed[1]))
    error, scope = run(program)
    assert error is None, error
    assert fixed[1].split(",")[-1].strip() in explain.explain(
        run(HERE / "checkpoint_under_ddp.py")[0]
    ).fix.replace("`", "")
    torch.manual_seed(0)
    layer = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    layer(layer(x)).sum().backward()
    trained = scope["model"].module.layer
    torch.testing.assert_close(trained.weight.grad, layer.weight.grad)
    torch.testing.assert_close(trained.bias.grad, layer.bias.grad)


def test_no_wrong_fix_is_ever_suggested():
    wrong = ["retain_graph=True", "loss.requires_grad", ".data"]
    for name in FAMILY:
        error, _ = run(HERE / f"{name}.py")
        explanation = explain.explain(error, error.__traceback__, error.watch)
        suggested = [e.new for e in explanation.edits]
        for text in suggested:
            assert not any(w in text for w in wrong), (name, text)
        if explanation.family == "no_graph":  # flagging the loss silences it and trains nothing
            assert not any("requires_grad" in text for text in suggested), name
        if name == "hidden_state":  # a graph carried across steps: never keep every graph alive
            assert "retain_graph" not in explanation.fix


def test_a_value_made_once_from_trained_weights_is_computed_again_not_detached():
    """Detaching `feature = w.exp()` would run, and w would never learn through it again: the
    fix is in words, to compute it inside the loop."""
    error, _ = run(HERE / "feature_of_trained_weights.py")
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation.family == "backward_twice" and not explanation.edits
    assert explanation.place("carried").code.startswith("feature = w.exp()")
    assert "inside the loop" in explanation.fix


def test_only_the_numpy_call_on_a_tensor_that_requires_grad_is_detached():
    error, _ = run(HERE / "numpy_beside_data.py")
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert [e.new for e in explanation.edits] == [
        "pairs = list(zip(steps.numpy(), (w * 2).detach().numpy(), strict=True))"
    ]


def test_inference_mode_is_named_as_the_cut_like_no_grad():
    error, _ = run(HERE / "inference_step.py")
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation.place("grad_off").code.startswith("with torch.inference_mode():")
    assert "inference_mode()" in explanation.fix


def test_a_loss_function_that_returns_every_sample_is_where_the_reduction_goes():
    error, _ = run(HERE / "loss_per_sample.py")
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation.place("unreduced").function == "criterion"
    assert "criterion()" in explanation.fix and not explanation.edits
    error, _ = run(HERE / "vector_backward.py")  # held in a name where backward() is called
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert explanation.place("unreduced") is None and explanation.edits


def test_an_error_that_is_not_autograds_passes_through():
    try:
        [].pop()
    except IndexError as err:
        assert explain.explain(err) is None


def test_the_explainer_failing_never_replaces_the_error(monkeypatch):
    error, _ = run(HERE / "activation_changed.py")

    def broken(*_):
        raise ValueError("the explainer's own bug")

    monkeypatch.setattr(catalogue, "FAMILIES", [catalogue.Family("x", "inplace", broken)])
    monkeypatch.setattr(explain, "FAMILIES", catalogue.FAMILIES)
    assert explain.explain(error, error.__traceback__, error.watch) is None


def test_without_records_it_says_nothing_rather_than_guess():
    error, _ = run(HERE / "activation_changed.py")
    assert explain.explain(error, error.__traceback__, explain.Watch()) is None


def test_a_script_run_with_python_m_helpers_explain_prints_the_explanation_after_the_traceback():
    import subprocess
    import sys

    script = HERE / "activation_changed.py"
    done = subprocess.run(
        [sys.executable, "-m", "helpers.explain", str(script)], capture_output=True, text=True
    )
    assert done.returncode == 1
    traceback_at = done.stderr.index("Traceback (most recent call last)")
    explained_at = done.stderr.index("autograd: a saved tensor was changed in place")
    assert traceback_at < explained_at
    assert "runpy" not in done.stderr  # the traceback starts at the learner's script
    assert "activation_changed.py:9" in done.stderr


def test_ipython_shows_an_explanation_as_its_text_not_its_fields():
    from IPython.lib.pretty import pretty

    error, _ = run(HERE / "activation_changed.py")
    explanation = explain.explain(error, error.__traceback__, error.watch)
    assert pretty(explanation) == explanation.as_text()
    assert "Location(" not in pretty(explanation)


def test_on_watches_once_and_off_gives_python_its_excepthook_back(monkeypatch):
    import sys

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    assert explain.watch() is None  # off: no watch, and Python's own hook
    watch = explain.on()
    try:
        assert isinstance(watch, explain.Watch) and explain.on() is watch  # on twice: one watch
        assert explain.watch() is watch and sys.excepthook is not sys.__excepthook__
        try:
            runpy.run_path(str(HERE / "activation_changed.py"), run_name="__main__")
        except RuntimeError as err:
            error = err
        found = explain.explain(error)  # the running watch's records, by default
        assert found is not None and found.family == "inplace_saved"
    finally:
        explain.off()
    assert explain.watch() is None and sys.excepthook is sys.__excepthook__
    explain.off()  # off twice: nothing left to switch off
    assert sys.excepthook is sys.__excepthook__

    def theirs(*_):
        pass

    explain.on()
    sys.excepthook = theirs  # a hook set after the explainer's: off() leaves it
    explain.off()
    assert sys.excepthook is theirs and explain.watch() is None


def test_the_script_hook_prints_the_traceback_then_the_explanation_or_only_the_traceback(
    monkeypatch, capsys
):
    import sys

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    explain.on()
    try:
        try:
            runpy.run_path(str(HERE / "activation_changed.py"), run_name="__main__")
        except RuntimeError as err:
            sys.excepthook(type(err), err, err.__traceback__)
        explained = text_outside_mutmut(capsys.readouterr().err)
        try:
            {}["no such key"]
        except KeyError as err:
            sys.excepthook(type(err), err, err.__traceback__)
        plain = capsys.readouterr().err
    finally:
        explain.off()
    assert explained.startswith("Traceback (most recent call last)")
    assert explained.index("modified by an inplace operation") < explained.index(
        "\nautograd: a saved tensor was changed in place"
    )
    assert "activation_changed.py:9   h.mul_(2)  # cause" in explained  # the causal line
    assert "helpers/explain/watch.py" not in explained  # the watch's own frames are taken out
    assert "helpers/doctor/watching.py" not in explained
    assert plain.startswith("Traceback") and plain.rstrip().endswith("KeyError: 'no such key'")
    assert "autograd" not in plain
