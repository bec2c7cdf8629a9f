"""The pipeline's ranks (helpers.pipeline_ranks): PyTorch's engine on three ranks, run as threads
of this process (tests/rank_threads.py), checked against one process; and the parts that need no
ranks. tests/test_engine_processes.py runs the same ranks as real processes, with faults."""

from __future__ import annotations

import pytest
import torch

from helpers.pipeline_ranks import (
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
from tests.rank_threads import run_here, run_in_threads, threads_available


@pytest.fixture(scope="module")
def runs():
    """One step of each schedule, three ranks each."""
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

    from helpers import pipeline_ranks

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
    from helpers.pipeline_ranks import _example_input

    tokens, activation = _example_input(0, 2), _example_input(1, 2)
    assert tokens.dtype == torch.long and tokens.shape == (2, 5) and not tokens.requires_grad
    assert activation.shape == (2, 5, 6) and activation.requires_grad
    assert activation.dtype == torch.float32 and _example_input(2, 3).shape == (3, 5, 6)
