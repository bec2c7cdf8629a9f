"""The engines' ranks as the notebook runs them: real processes (helpers.ranks.launch.run_ranks).

The rank code's unit tests run the ranks as threads (tests/rank_threads.py), which is fast and
lets `make mutate` see the code; here the same ranks run as processes, and must record exactly
what the threads recorded. A rank that fails or hangs is named, with what it was doing.
"""

from __future__ import annotations

import pytest
import torch

from helpers.ranks.data_parallel_ranks import DP_ROLES, DP_WORLD, run_data_parallel
from helpers.ranks.failures import DistributedRunError
from helpers.ranks.launch import run_ranks
from helpers.ranks.pipeline_ranks import ROLES, SCHEDULES, STAGES, run_stage
from tests.ranks.rank_threads import run_in_threads, threads_available

needs_threads = pytest.mark.skipif(
    not threads_available(), reason="ranks as threads are proven on torch 2.13 and later only"
)


def same(a, b, where="") -> None:
    """a and b are equal: tensors exactly, containers item by item, dataclasses field by field."""
    if hasattr(a, "__dataclass_fields__"):
        a, b = vars(a), vars(b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@needs_threads
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_pipeline_processes_record_what_threads_record(schedule):
    kwargs = {"schedule": schedule}
    processes = run_ranks(run_stage, STAGES, roles=ROLES, kwargs=kwargs).results
    threads = run_in_threads(run_stage, STAGES, kwargs=kwargs)
    same(processes, threads)
    assert processes[1].actions and processes[1].backward_calls  # something was recorded


@needs_threads
def test_data_parallel_processes_record_what_threads_record():
    processes = run_ranks(run_data_parallel, DP_WORLD, roles=DP_ROLES).results
    threads = run_in_threads(run_data_parallel, DP_WORLD)
    same(processes, threads)
    assert processes[0]["buckets"] and processes[0]["hook order"]


def test_the_comparison_sees_a_difference():
    with pytest.raises(AssertionError, match=r"\.b\[1\]"):
        same({"a": torch.ones(2), "b": [1, 2]}, {"a": torch.ones(2), "b": [1, 3]})
    with pytest.raises(AssertionError, match=r"\.a"):
        same({"a": torch.ones(2)}, {"a": torch.zeros(2)})


def test_a_stage_that_raises_is_named_with_its_message():
    with pytest.raises(DistributedRunError) as caught:
        run_ranks(run_stage, STAGES, roles=ROLES, timeout=5,
                  kwargs={"schedule": "GPipe", "fault": (2, "B", 1, "raise")})  # fmt: skip
    message = str(caught.value)
    assert message.startswith(
        "rank 2 (stage 2) failed while computing the backward of "
        "micro-batch 1: RuntimeError: injected failure on rank 2 in the backward of 1"
    )
    assert caught.value.rank == 2 and "none is left running" in message


def test_a_stage_that_hangs_is_named_by_its_neighbours_timeouts():
    with pytest.raises(DistributedRunError) as caught:
        run_ranks(run_stage, STAGES, roles=ROLES, timeout=2,
                  kwargs={"schedule": "1F1B", "fault": (0, "F", 3, "hang")})  # fmt: skip
    assert str(caught.value).splitlines()[:2] == [
        "rank 0 (stage 0) stopped answering while computing the forward of micro-batch 3, not "
        "waiting for any rank (stuck, or slower than the 2 s timeout)",
        "A rank waiting for it timed out; .reports has every rank's last state.",
    ]
    assert caught.value.rank == 0 and caught.value.reports[0]["status"] == "stopped"
