"""DDP's ranks (helpers.ranks.data_parallel_ranks): two ranks, run as threads of this process
(tests/rank_threads.py), checked against one process. tests/test_engine_processes.py runs them as
real processes."""

from __future__ import annotations

import pytest
import torch

from helpers.ranks.data_parallel_ranks import (
    DP_WORLD,
    PostModel,
    accumulated_grads,
    check_rank,
    full_batch_grads,
    half_batch,
    run_data_parallel,
)
from helpers.ranks.pipeline_ranks import pipeline_batch
from helpers.split import token_loss
from tests.ranks.rank_threads import run_here, run_in_threads, threads_available


@pytest.fixture
def dp():
    """Both ranks' records, run again for every test (0.1 s): see test_pipeline_ranks.runs."""
    return run_here(run_data_parallel, DP_WORLD)


def test_the_halves_make_the_batch():
    tokens, _ = pipeline_batch()
    assert torch.equal(torch.cat([half_batch(0)[0], half_batch(1)[0]]), tokens)


def test_ddp_and_the_hand_written_average_equal_the_full_batch(dp):
    full = full_batch_grads()
    for rank in range(DP_WORLD):
        for key in ("ddp", "by hand"):
            assert dp[rank][key].keys() == full.keys()
            for name, g in full.items():
                torch.testing.assert_close(dp[rank][key][name], g)
        assert check_rank(rank, dp[rank]).endswith("7 DDP gradients equal one process")


def test_a_summed_all_reduce_would_not(dp):
    """What the equality above rules out: each half alone differs, their sum is twice the batch."""
    full = full_batch_grads()
    for name, g in full.items():
        halves = [dp[r]["local"][name] for r in range(DP_WORLD)]
        assert not torch.allclose(halves[0], g)
        torch.testing.assert_close(halves[0] + halves[1], 2 * g)
    wrong = {**dp[0], "ddp": {n: 2 * g for n, g in full.items()}}
    with pytest.raises(AssertionError, match="differs from one process"):
        check_rank(0, wrong)


def test_buckets_carry_every_gradient_once_and_are_rebuilt_in_ready_order(dp):
    steps = dp[0]["buckets"]
    assert steps == dp[1]["buckets"] and len(steps) == 2
    names = list(full_batch_grads())
    for buckets in steps:
        carried = [p for b in buckets for p in b["parameters"]]
        assert sorted(carried) == sorted(names)
        assert sum(b["bytes"] for b in buckets) == 4 * sum(b["numbers"] for b in buckets) == 660
    assert [p for b in steps[1] for p in b["parameters"]] == dp[0]["hook order"]
    assert dp[0]["hook order"][0] == "model3.bias"  # the last layer's gradient is ready first


def test_no_sync_accumulation_equals_a_batch_twice_as_large(dp):
    bigger = accumulated_grads()
    for rank in range(DP_WORLD):
        for name, g in bigger.items():
            torch.testing.assert_close(dp[rank]["no_sync"][name], g)
    assert not torch.allclose(bigger["model3.bias"], full_batch_grads()["model3.bias"])


def test_an_unused_layer_stops_ddp_unless_it_looks_for_it(dp):
    unused = dp[0]["unused"]
    assert unused["error"].startswith("Expected to have finished reduction in the prior iteration")
    assert unused["grads"]["unused.weight"] is None and unused["grads"]["unused.bias"] is None
    assert sum(g is not None for g in unused["grads"].values()) == 7


def test_the_post_model_is_the_three_models_without_cuts():
    model = PostModel()
    assert [n for n, _ in model.named_parameters()] == list(full_batch_grads())
    assert "unused.weight" in dict(PostModel(unused_layer=True).named_parameters())


def test_the_batch_must_be_split_in_two():
    with pytest.raises(ValueError, match="split in 2, not 3"):
        run_data_parallel(0, 3)


def test_other_seeds_and_data_give_their_own_full_batch():
    dp = run_here(run_data_parallel, DP_WORLD, kwargs={"seed": 7, "data_seed": 1})
    full, bigger = full_batch_grads(seed=7, data_seed=1), accumulated_grads(seed=7, data_seed=1)
    assert not torch.allclose(full["model3.bias"], full_batch_grads()["model3.bias"])
    for rank in range(DP_WORLD):
        for name, g in full.items():
            torch.testing.assert_close(dp[rank]["ddp"][name], g)
            torch.testing.assert_close(dp[rank]["by hand"][name], g)
            torch.testing.assert_close(dp[rank]["no_sync"][name], bigger[name])
            if name in dp[rank]["unused"]["grads"]:
                torch.testing.assert_close(dp[rank]["unused"]["grads"][name], g)
        local = PostModel(7)
        token_loss(local(half_batch(rank, 1)[0]), half_batch(rank, 1)[1]).backward()
        torch.testing.assert_close(dp[rank]["local"]["model3.bias"], local.model3.bias.grad)


def test_the_tiny_buckets_are_several_once_rebuilt_and_numbered(dp):
    first, rebuilt = dp[0]["buckets"]
    assert len(first) == 1 and len(rebuilt) == 2  # with DDP's default size: one bucket, always
    for buckets in (first, rebuilt):
        assert [b["bucket"] for b in buckets] == list(range(len(buckets)))


def test_the_unused_layer_has_the_models_width():
    assert PostModel(unused_layer=True).unused.weight.shape == (6, 6)


def test_the_check_tolerates_rounding(dp):
    nudged = {**dp[0], "ddp": {n: g + 5e-7 for n, g in dp[0]["ddp"].items()}}
    assert check_rank(0, nudged) == (
        "rank 0 (data-parallel rank 0: examples 0-3): 7 DDP gradients equal one process"
    )


@pytest.mark.skipif(not threads_available(), reason="needs ranks as threads")
def test_each_rank_says_what_it_is_doing(monkeypatch):
    import threading

    from helpers.ranks import data_parallel_ranks

    said = []
    monkeypatch.setattr(data_parallel_ranks, "doing", lambda what: said.append(
        (threading.current_thread().name, what)))  # fmt: skip
    run_in_threads(run_data_parallel, DP_WORLD)
    assert [what for name, what in said if name == "rank-0"] == [
        "computing the gradients of its own half",
        "computing DDP step 1",
        "computing DDP step 2",
        "computing the hand-written data-parallel backward",
        "computing the accumulation under no_sync()",
        "computing two steps with an unused layer, without find_unused_parameters",
        "computing two steps with an unused layer, with find_unused_parameters=True",
    ]
