"""The engines' ranks as threads of the test process: an in-memory stand-in for run_ranks.

`helpers.ranks.launch.run_ranks` starts one process per rank, which is what the notebook runs and
what tests/ranks/test_launch.py proves. For the unit tests of the rank code itself (and for
`make mutate`, which can only see code that runs in the test process) every rank here is a thread
with its own gloo process group, talking to the others through an in-memory store on
127.0.0.1. torch's own multi-threaded tests work this way (a world per thread, and process-group
names kept apart per thread).

    results = run_in_threads(run_stage, 3, kwargs={"schedule": "1F1B"})
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["run_in_threads", "threads_available"]


def threads_available() -> bool:
    """True on the releases where ranks as threads are proven to work: torch 2.13 and later.

    (torch 2.11's threaded world lacks an attribute its own c10d reads, and on torch 2.4 a
    threaded run hung; there, and on the releases between, the tests use processes.)"""
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    return release >= (2, 13) and hasattr(torch._C._distributed_c10d, "_set_thread_isolation_mode")


@contextmanager
def _world_per_thread() -> Iterator[None]:
    from torch.testing._internal.distributed import multi_threaded_pg

    old = dist.distributed_c10d._world
    dist.distributed_c10d._world = multi_threaded_pg.ThreadLocalWorld()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    try:
        yield
    finally:
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        dist.distributed_c10d._world = old


def run_in_threads(
    target: Callable[..., Any],
    world_size: int,
    *,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 5.0,
) -> dict[int, Any]:
    """Run `target(rank, world_size, **kwargs)` on `world_size` threads; what each returned.

    Raises RuntimeError naming every rank that failed, with its traceback. Each of gloo's waits
    is bounded by `timeout`; a thread still running after twice that is reported as hung.
    """
    store = dist.HashStore()
    results: dict[int, Any] = {}
    errors: dict[int, str] = {}

    def rank_main(rank: int) -> None:
        try:
            dist.init_process_group(
                "gloo", store=store, rank=rank, world_size=world_size,
                timeout=timedelta(seconds=timeout),
            )  # fmt: skip
            try:
                results[rank] = target(rank, world_size, **dict(kwargs or {}))
                dist.barrier()
            finally:
                dist.destroy_process_group()
        except BaseException:
            errors[rank] = traceback.format_exc()

    with _world_per_thread():
        threads = [
            threading.Thread(target=rank_main, args=(r,), name=f"rank-{r}", daemon=True)
            for r in range(world_size)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(2 * timeout)
        hung = [r for r, thread in enumerate(threads) if thread.is_alive()]
    _forget_active_ddp_module()
    for rank in hung:
        errors[rank] = f"still running after {2 * timeout:g} s"
    if errors:
        raise RuntimeError(
            "\n".join(f"rank {r} failed:\n{text}" for r, text in sorted(errors.items()))
        )
    return {rank: results[rank] for rank in sorted(results)}


def _forget_active_ddp_module() -> None:
    """DDP's forward sets a class attribute, `DistributedDataParallel._active_ddp_module`, and
    restores the value it found on exit. Two ranks' forwards in threads of one process can
    interleave (A enters, B enters and saves A, A restores None, B restores A), leaving a module
    marked active after both returned; a later `torch.compile` in this process then takes its
    DDP path. Ranks as processes never share it."""
    from torch.nn.parallel import DistributedDataParallel

    if hasattr(DistributedDataParallel, "_active_ddp_module"):
        DistributedDataParallel._active_ddp_module = None


def run_here(target: Callable[..., Any], world_size: int, **options: Any) -> dict[int, Any]:
    """The ranks as threads where torch allows it; elsewhere (torch 2.4) as processes."""
    if threads_available():
        return run_in_threads(target, world_size, **options)
    from helpers.ranks.launch import run_ranks

    return run_ranks(target, world_size, **options).results
