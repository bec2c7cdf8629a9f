"""helpers.interactive.explorers: what the graph explorer and the optimizer lab compute."""

import pytest
import torch

from helpers.interactive import explorers
from helpers.interactive.explorers import (
    ARRANGEMENTS,
    LOSSES,
    explore_graph,
    explorer_code,
    optimizer_code,
    optimizer_run,
)
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)

# ---- graph explorer ------------------------------------------------------------------------


def test_explorer_code_follows_the_toggles():
    plain = explorer_code(False, False, False)
    assert "detach" not in plain and "retain_grad" not in plain
    assert "x = torch.tensor([1.0, 2.0, 3.0])  # the input" in plain
    every = explorer_code(True, True, True)
    assert "h_cut = h.detach()" in every and "h.retain_grad()" in every
    assert "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)" in every


def test_the_programs_comments_and_the_graph_title_speak_the_twin_s_language():
    from helpers.language import set_language

    set_language("zh")
    try:
        code = explorer_code(detach=True, input_requires_grad=False, retain_grad=False)
        lab = optimizer_code("Adam", 0.01, True, ARRANGEMENTS[1], LOSSES[1])
        result = explore_graph(detach=True)
        title = result.graph.graph_attr.get("label") or "".join(result.graph.body)
        run = optimizer_run("Adam", 0.01, True, ARRANGEMENTS[1], LOSSES[1])  # runs that code
    finally:
        set_language("en")
    assert "x = torch.tensor([1.0, 2.0, 3.0])  # 输入" in code
    assert "h_cut = h.detach()  # 切口" in code and "# model" not in code
    assert "ff2 = f2.clone().detach().requires_grad_(True)  # 切口 2" in lab
    assert "# 三个模型共用一个" in lab and "# the post" not in lab
    assert "y 的计算图（以及 h 的）" in title
    assert "# 切口 1" in run.code


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


# ---- optimizer lab ---------------------------------------------------------------------------


def moved_counts(run):
    return [sum(step[i] for step in run.moves) for i in range(3)]


def test_one_optimizer_per_model_moves_each_model_once():
    for name in explorers.OPTIMIZERS:
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
    monkeypatch.setattr(explorers, "optimizer_code", lambda *args: shown)
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


def test_the_explorer_names_its_tensors_in_a_titled_graph_of_y_and_h():
    result = explore_graph()
    assert result.code == explorer_code(False, False, False)
    assert not result.tensors["h"].retains_grad  # retain_grad is off unless asked for
    text = result.graph.text()
    for label in ("y scalar  <output>", "h [3]  <output>", "w1 [3]  <leaf>", "w2 [3]  <leaf>"):
        assert label in text, label
    assert 'label="graph of y (and of h)"' in result.graph.source
    cut = explore_graph(detach=True).graph.text()
    assert "w1 [3]" in cut  # h's own graph, cut off from y's, is drawn as well


def test_the_moves_table_marks_each_step_and_whether_it_matches_one_per_model():
    run = optimizer_run("Adam", 0.01, set_to_none=False, arrangement=ARRANGEMENTS[1])
    table = run.moves_table()
    assert table.rows[:3] == [
        {"step() after": "loss.backward()", "model1": "-", "model2": "-", "model3": "moved"},
        {
            "step() after": "f2.backward(ff2.grad)",
            "model1": "-",
            "model2": "moved",
            "model3": "moved",
        },
        {
            "step() after": "f1.backward(ff1.grad)",
            "model1": "moved",
            "model2": "moved",
            "model3": "moved",
        },
    ]
    assert table.rows[4] == {
        "step() after": "same as one optimizer per model?",
        "model1": "yes",
        "model2": "NO",
        "model3": "NO",
    }


def test_the_figure_is_titled_with_the_setting_and_drawn_once():
    run = optimizer_run("SGD", 0.5, set_to_none=True, arrangement=ARRANGEMENTS[0], loss=LOSSES[1])
    figure = run.figure()
    assert figure is run.figure()
    assert "SGD, lr=0.5, one per model, set_to_none=True, per token loss" in str(
        figure.figure.texts[0].get_text()
    )
    post = optimizer_run("SGD", 0.5, set_to_none=True, arrangement=ARRANGEMENTS[0])
    assert "loss" not in post.figure().figure.texts[0].get_text()


def test_a_step_line_is_one_that_ends_in_a_step_call_before_any_comment():
    assert explorers._is_step("opts[2].step()")
    assert explorers._is_step("opt.step()  # one for all three")
    assert not explorers._is_step("opt.step() if ready else None")
    assert not explorers._is_step("x = 1  # not opt.step()")
    assert explorers._is_step("opt.step()  # a # b")  # the first # starts the comment


def test_a_parameter_that_did_not_move_shows_zero():
    assert explorers._format_delta(0.0) == "0"
    assert explorers._format_delta(1.0) == "1" and explorers._format_delta(0.01234) == "0.012"


def test_the_lab_starts_from_the_posts_setting_and_names_what_it_needs():
    run = optimizer_run()
    assert (run.optimizer, run.lr, run.set_to_none) == ("Adam", 0.01, True)
    assert run.arrangement == ARRANGEMENTS[0] and run.loss == LOSSES[0]
    assert "out, loss = models.model3(ff2, label)  # the post's loss" in run.code.splitlines()
    assert "note" in run.moved_table().columns  # the biases' noise gets its note
    with pytest.raises(ValueError, match=r"^the lab's program never built `models`$"):
        explorers._run_lab_code("x = 1")
    with pytest.raises(ValueError) as unknown:
        optimizer_run(arrangement="two")
    assert str(unknown.value) == (
        "unknown arrangement 'two'; choose one of one per model, one for all three"
    )
