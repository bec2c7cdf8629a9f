"""The pipeline's ranks (helpers.ranks.pipeline_ranks): PyTorch's engine on three ranks, run as
threads of this process (tests/ranks/rank_threads.py), checked against one process; and the parts
that need no ranks. tests/ranks/test_engine_processes.py runs the same ranks as real processes,
with faults."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.ranks.pipeline_ranks import (
    MICROBATCHES,
    SCHEDULES,
    STAGES,
    check_stage,
    engine_needs_repair,
    handoff_reference,
    joint_reference,
    pipeline_batch,
    run_stage,
)
from tests.ranks.rank_threads import run_here, run_in_threads, threads_available


@pytest.fixture
def runs():
    """One step of each schedule, three ranks each: run again for every test (0.2 s), because
    `make mutate` credits what a fixture runs to the first test that asked for it only."""
    return {name: run_here(run_stage, STAGES, kwargs={"schedule": name}) for name in SCHEDULES}


def test_the_batch_is_seeded_and_cut_into_equal_micro_batches():
    tokens, targets = pipeline_batch()
    again, _ = pipeline_batch()
    assert torch.equal(tokens, again) and not torch.equal(tokens, pipeline_batch(seed=1)[0])
    assert tokens.shape == targets.shape == (8, 5) and len(tokens.chunk(MICROBATCHES)) == 4
    assert int(tokens.max()) < 10 and set(targets.unique().tolist()) <= {0, 1, 2}


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_both_schedules_train_exactly_like_one_process(runs, schedule):
    ranks = runs[schedule]
    reference = joint_reference()
    torch.testing.assert_close(sum(ranks[2].losses) / MICROBATCHES, reference["loss"])
    grads = {n: g for r in ranks.values() for n, g in r.grads.items()}
    assert grads.keys() == reference["grads"].keys()
    for name, g in reference["grads"].items():
        torch.testing.assert_close(grads[name], g)
    lines = [check_stage(rank, r) for rank, r in ranks.items()]
    assert lines[2].endswith(f"loss {reference['loss']:.4f}") and "3 gradients" in lines[0]


def test_the_check_fails_on_a_wrong_gradient_and_a_wrong_loss(runs):
    record = runs["GPipe"][2]
    wrong = type(record)(**{**record.__dict__, "grads": dict(record.grads)})
    wrong.grads["model3.layer.bias"] = wrong.grads["model3.layer.bias"] * 2
    with pytest.raises(AssertionError, match=r"model3\.layer\.bias's gradient differs"):
        check_stage(2, wrong)
    lossy = type(record)(**{**record.__dict__, "losses": [x + 0.1 for x in record.losses]})
    with pytest.raises(AssertionError, match="loss"):
        check_stage(2, lossy)


def test_each_schedule_runs_its_own_order(runs):
    gpipe = [f"{k}{m}" for k, m in runs["GPipe"][1].actions]
    one_f = [f"{k}{m}" for k, m in runs["1F1B"][1].actions]
    assert gpipe == ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]
    assert one_f == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert [f"{k}{m}" for k, m in runs["1F1B"][2].actions][:4] == ["F0", "B0", "F1", "B1"]


def test_the_stage_backward_is_the_hand_off(runs):
    handoff = handoff_reference()
    for ranks in runs.values():
        for mb, crossed in enumerate(handoff):
            torch.testing.assert_close(ranks[1].arrived[mb], crossed["ff2.grad"])
            torch.testing.assert_close(ranks[0].arrived[mb], crossed["ff1.grad"])
            torch.testing.assert_close(ranks[2].sent_back[mb], ranks[1].arrived[mb])
            torch.testing.assert_close(ranks[1].sent_back[mb], ranks[0].arrived[mb])
        assert ranks[2].arrived == {mb: None for mb in range(MICROBATCHES)}  # the loss
        assert ranks[0].sent_back == {mb: None for mb in range(MICROBATCHES)}  # tokens: no grad
        calls = ranks[0].backward_calls + ranks[1].backward_calls
        assert len(calls) == 2 * MICROBATCHES
        assert all(c["same outputs"] and c["same gradients"] for c in calls)


def test_a_wrong_hand_off_would_show(runs):
    """The check above can fail: a hand-off that sent back the gradient it received would not
    equal 06's ff1.grad."""
    handoff = handoff_reference()
    assert not torch.allclose(runs["1F1B"][1].arrived[0], handoff[0]["ff1.grad"])


def test_1f1b_keeps_fewer_activations_and_frees_them_all(runs):
    for rank in range(STAGES):
        gpipe, one_f = runs["GPipe"][rank].activation_bytes, runs["1F1B"][rank].activation_bytes
        assert max(one_f) < max(gpipe) and gpipe[-1] == one_f[-1] == 0
        assert len(gpipe) == len(one_f) == 2 * MICROBATCHES
    # rank 1 holds 4 micro-batches' activations under GPipe, 2 under 1F1B, of 240 bytes each
    assert max(runs["GPipe"][1].activation_bytes) == 4 * 240
    assert max(runs["1F1B"][1].activation_bytes) == 2 * 240


def test_the_sends_are_counted_from_the_engine(runs):
    for ranks in runs.values():
        assert [s for s in ranks[0].sent if s[0] == "gradient"] == []
        assert [s for s in ranks[2].sent if s[0] == "activation"] == []
        assert sorted(ranks[1].sent) == sorted(
            [("activation", mb, 240) for mb in range(4)]
            + [("gradient", mb, 240) for mb in range(4)]
        )


def test_without_scale_grads_the_gradients_are_the_sum_over_micro_batches():
    unscaled = run_here(run_stage, STAGES, kwargs={"schedule": "GPipe", "scale_grads": False})
    reference = joint_reference()
    for rank in unscaled.values():
        for name, g in rank.grads.items():
            torch.testing.assert_close(g, MICROBATCHES * reference["grads"][name])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schedule": "Interleaved"}, "schedule must be one of"),
        ({"fault": (1, "F", 2)}, "fault must be"),
        ({"fault": (1, "F", 2, "explode")}, "fault must be"),
    ],
)
def test_bad_arguments_name_what_is_wrong(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_stage(0, STAGES, **kwargs)
    with pytest.raises(ValueError, match="3 stages, not 2"):
        run_stage(0, 2)


def test_the_repair_is_needed_only_where_the_engine_keeps_one_handle(monkeypatch):
    from torch.distributed.pipelining import schedules

    from helpers.ranks import pipeline_ranks

    source = "def _batch_p2p(ops):\n    return dist.batch_isend_irecv(ops).pop()\n"
    monkeypatch.setattr(pipeline_ranks.inspect, "getsource", lambda fn: source)
    assert engine_needs_repair()
    monkeypatch.undo()
    assert engine_needs_repair() is (".pop()" in pipeline_ranks.inspect.getsource(
        schedules._batch_p2p))  # fmt: skip

    waited = []

    class Work:
        def __init__(self, name):
            self.name = name

        def wait(self, *args):
            waited.append(self.name)

    monkeypatch.setattr(
        pipeline_ranks.dist, "batch_isend_irecv", lambda ops: [Work(o) for o in ops]
    )
    monkeypatch.setattr(schedules, "_batch_p2p", schedules._batch_p2p)
    pipeline_ranks._repair_engine()
    assert schedules._batch_p2p([], desc="none") is None
    assert schedules._batch_p2p(["send", "recv"]).wait() is True
    assert waited == ["send", "recv"]  # every handle, not only the last


@pytest.mark.skipif(not threads_available(), reason="tests/test_engine_processes.py has it")
def test_a_fault_fails_the_named_rank_in_the_named_computation():
    with pytest.raises(RuntimeError) as caught:
        run_in_threads(run_stage, STAGES, timeout=2,
                       kwargs={"schedule": "GPipe", "fault": (2, "B", 1, "raise")})  # fmt: skip
    own = str(caught.value).split("rank 2 failed:")[1]
    assert "RuntimeError: injected failure on rank 2 in the backward of 1" in own


def test_the_example_inputs_for_torch_2_4_are_what_each_stage_receives():
    from helpers.ranks.pipeline_ranks import _example_input

    tokens, activation = _example_input(0, 2), _example_input(1, 2)
    assert tokens.dtype == torch.long and tokens.shape == (2, 5) and not tokens.requires_grad
    assert activation.shape == (2, 5, 6) and activation.requires_grad
    assert activation.dtype == torch.float32 and _example_input(2, 3).shape == (3, 5, 6)


def test_each_record_names_its_rank_schedule_and_who_scaled(runs):
    import inspect

    from torch.distributed.pipelining import ScheduleGPipe

    if "scale_grads" in inspect.signature(ScheduleGPipe).parameters:
        scaler = "the engine (scale_grads=True)"
    else:
        scaler = ("run_stage: this release's schedules do not scale, so it divides by the number "
                  "of micro-batches itself")  # fmt: skip
    for schedule, ranks in runs.items():
        for rank, record in ranks.items():
            assert (record.rank, record.schedule) == (rank, schedule)
            assert record.repaired is engine_needs_repair()
            assert record.scaled_by == scaler
    unscaled = run_here(run_stage, STAGES, kwargs={"scale_grads": False})
    assert unscaled[0].scaled_by == "nobody (scale_grads=False): the sum over the micro-batches"


def test_every_stage_backward_call_is_recorded_with_its_micro_batch_and_outputs(runs):
    from helpers.split import build_models, cut

    models = build_models()
    f1 = models.model1(pipeline_batch()[0][:2])
    names = {0: type(f1.grad_fn).__name__, 1: type(models.model2(cut(f1)).grad_fn).__name__}
    for ranks in runs.values():
        for rank in (0, 1):
            calls = ranks[rank].backward_calls
            assert sorted(c["microbatch"] for c in calls) == list(range(MICROBATCHES))
            backwards = [m for k, m in ranks[rank].actions if k == "B"]
            assert [c["microbatch"] for c in calls] == backwards
            assert all(c["outputs"] == [names[rank]] for c in calls)


def test_the_check_tolerates_rounding_and_says_which_rank(runs):
    record = runs["GPipe"][2]
    nudged = type(record)(**{**record.__dict__,
                             "grads": {n: g + 5e-7 for n, g in record.grads.items()},
                             "losses": [x + 5e-7 for x in record.losses]})  # fmt: skip
    line = check_stage(2, nudged)
    assert line.startswith(
        "rank 2 (stage 2: model 3 and the labels): 2 gradients equal one process"
    )
    assert line.endswith("; loss " + f"{sum(nudged.losses) / MICROBATCHES:.4f}")


def test_the_batch_uses_every_token_id_and_label_from_0():
    tokens, targets = pipeline_batch()
    assert int(tokens.min()) == 0 and int(targets.min()) == 0 and int(targets.max()) == 2


@pytest.mark.skipif(not threads_available(), reason="tests/test_engine_processes.py has faults")
def test_a_fault_in_a_forward_and_a_hang_are_injected_where_asked(monkeypatch):
    from helpers.ranks import pipeline_ranks

    with pytest.raises(RuntimeError) as caught:
        run_in_threads(run_stage, STAGES, timeout=2,
                       kwargs={"schedule": "1F1B", "fault": (1, "F", 2, "raise")})  # fmt: skip
    assert "injected failure on rank 1 in the forward of 2" in str(caught.value)

    class Slept(Exception):
        pass

    def sleep(seconds):
        raise Slept(f"would sleep {seconds} s")

    monkeypatch.setattr(pipeline_ranks.time, "sleep", sleep)
    with pytest.raises(RuntimeError) as caught:
        run_in_threads(run_stage, STAGES, timeout=2,
                       kwargs={"schedule": "GPipe", "fault": (0, "B", 3, "hang")})  # fmt: skip
    assert "Slept: would sleep 3600 s" in str(caught.value).split("rank 0 failed:")[1]


@pytest.mark.skipif(not threads_available(), reason="needs ranks as threads")
def test_each_rank_says_what_it_is_doing(monkeypatch):
    import threading

    from helpers.ranks import pipeline_ranks

    said = []
    monkeypatch.setattr(pipeline_ranks, "doing", lambda what: said.append(
        (threading.current_thread().name, what)))  # fmt: skip
    run_in_threads(run_stage, STAGES, kwargs={"schedule": "GPipe"})
    rank1 = [what for name, what in said if name == "rank-1"]
    assert rank1[0] == "building its stage and schedule"
    assert rank1[1:4] == [
        "computing the forward of micro-batch 0",
        "in the schedule, between computations (sending or receiving)",
        "computing the forward of micro-batch 1",
    ]
    assert "computing the backward of micro-batch 3" in rank1


def test_the_spy_passes_other_threads_calls_through_unchanged(monkeypatch):
    import threading

    import torch.distributed.pipelining.stage as stage_code

    from helpers.ranks.pipeline_ranks import StageRun, _EngineSpy, _StageRecorder

    seen = []
    monkeypatch.setattr(stage_code, "stage_backward", lambda *a, **k: seen.append(("stage", a, k)))
    monkeypatch.setattr(torch.autograd, "backward", lambda *a, **k: seen.append(("autograd", a, k)))
    recorder = _StageRecorder(StageRun(0, "GPipe"), 0, None)
    with _EngineSpy.reporting_to(recorder):
        def elsewhere():
            stage_code.stage_backward(1, 2, output_grads=3)
            torch.autograd.backward("t", "g", "more", retain_graph=True)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert seen == [("stage", (1, 2), {"output_grads": 3}),
                    ("autograd", ("t", "g", "more"), {"retain_graph": True})]  # fmt: skip
    assert recorder.record.backward_calls == [] and stage_code.stage_backward is not None


def test_a_gradient_edge_starts_from_its_node_and_arguments_bind_by_name():
    from helpers.ranks.pipeline_ranks import _bind, _node

    class Edge:
        node = "the node"

    t = torch.ones(1, requires_grad=True) * 2
    assert _node(Edge()) == "the node" and _node(t) is t.grad_fn
    assert _bind(lambda a, b=0, *rest, c=1: None, (1,), {"c": 5}) == {"a": 1, "c": 5}


def test_torch_2_4s_stage_gets_the_shapes_up_front(monkeypatch):
    """torch 2.4's PipelineStage needs example inputs and outputs, and its schedules take no
    scale_grads: make_schedule gives them what each stage receives and returns."""
    import torch.distributed.pipelining as pipelining

    from helpers.ranks.pipeline_ranks import make_schedule
    from helpers.split import token_loss

    made = {}

    class OldStage:
        def __init__(self, module, stage_index, num_stages, device, input_args, output_args):
            made["stage"] = (module, stage_index, num_stages, device, input_args, output_args)

    class OldGPipe:
        def __init__(self, stage, n_microbatches, loss_fn):
            made["schedule"] = (stage, n_microbatches, loss_fn)

    monkeypatch.setattr(pipelining, "PipelineStage", OldStage)
    monkeypatch.setattr(pipelining, "ScheduleGPipe", OldGPipe)
    for rank, width in ((0, 6), (1, 6), (2, 3)):
        stage, _, scales = make_schedule("module", rank, "GPipe", MICROBATCHES)
        module, index, count, device, example, out = made["stage"]
        assert (module, index, count, device.type) == ("module", rank, STAGES, "cpu")
        assert out.shape == (2, 5, width) and example.shape[0] == 2
        assert example.dtype == (torch.long if rank == 0 else torch.float32)
        assert made["schedule"] == (stage, MICROBATCHES, token_loss) and scales is False


def test_later_releases_schedules_scale_the_gradients_unless_told_not_to(monkeypatch):
    import torch.distributed.pipelining as pipelining

    from helpers.ranks.pipeline_ranks import make_schedule

    made = {}

    class NewStage:
        def __init__(self, module, stage_index, num_stages, device, input_args=None):
            made["stage"] = (module, stage_index, num_stages, device.type, input_args)

    class New1F1B:
        def __init__(self, stage, n_microbatches, loss_fn, scale_grads=True):
            made["scale_grads"] = scale_grads

    monkeypatch.setattr(pipelining, "PipelineStage", NewStage)
    monkeypatch.setattr(pipelining, "Schedule1F1B", New1F1B)
    assert make_schedule("m", 1, "1F1B", MICROBATCHES)[2] is True
    assert made == {"stage": ("m", 1, STAGES, "cpu", None), "scale_grads": True}
    make_schedule("m", 1, "1F1B", MICROBATCHES, scale_grads=False)
    assert made["scale_grads"] is False


def test_the_recorder_sees_what_the_engine_passed_and_what_autograd_was_given(monkeypatch):
    import torch.distributed.pipelining.stage as stage_code

    from helpers.ranks.pipeline_ranks import StageRun, _EngineSpy, _StageRecorder

    output = torch.ones(2, requires_grad=True) * 3
    arrived, other = torch.full((2,), 2.0), torch.full((2,), 5.0)

    def engine(stage_output, output_grads, input_values=None):
        torch.autograd.backward([stage_output], grad_tensors=[other])  # not what arrived
        return [torch.full((2,), 7.0)]

    monkeypatch.setattr(stage_code, "stage_backward", engine)
    recorder = _StageRecorder(StageRun(1, "GPipe"), 1, None)
    recorder.microbatch = 3
    with _EngineSpy.reporting_to(recorder):
        stage_code.stage_backward(stage_output=output, output_grads=[arrived])
    (call,) = recorder.record.backward_calls
    assert call == {"microbatch": 3, "outputs": ["MulBackward0"], "same outputs": True,
                    "same gradients": False}  # fmt: skip
    assert torch.equal(recorder.record.arrived[3], arrived)
    assert torch.equal(recorder.record.sent_back[3], torch.full((2,), 7.0))


def test_who_scaled_is_said_in_the_learners_language():
    from helpers.language import set_language
    from helpers.ranks.pipeline_ranks import SCALERS, StageRun

    record = StageRun(0, "1F1B", scaler="engine")
    assert record.scaled_by == "the engine (scale_grads=True)"
    set_language("zh")
    try:
        said = {s: StageRun(0, "1F1B", scaler=s).scaled_by for s in SCALERS}
    finally:
        set_language("en")
    assert said["engine"] == "引擎（scale_grads=True）"
    assert not any(re.search(r"\b(the|nobody|itself)\b", s) for s in said.values()), said
    assert StageRun(0, "GPipe").scaled_by == ""  # not run yet
