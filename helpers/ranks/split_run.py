"""07's split across three processes: run it (`run_distributed`), and the same in one process.

What each rank runs (the wire, its part of a step) is `helpers.ranks.split_ranks`; the launcher
that starts the processes and names a rank that failed is `helpers.ranks.launch`; figures and
tables of a run are `helpers.ranks.split_display`. This module hands the launcher each rank's
function and gathers the three results into one run, checked message by message.

    run = run_distributed(steps=5)   # Python or a notebook: starts three processes, collects
    python -m helpers.ranks split    # the same from a shell, checked against one process

Demonstrating failures is done here too: `run_distributed(fail_rank=...)` hands the started rank
a fault plan, and its wire triggers the fault when the step begins. The functions that are taught
never see it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from helpers.display import Table
from helpers.ranks.failures import DistributedRunError
from helpers.ranks.launch import report_status, run_ranks
from helpers.ranks.split_display import wire_table
from helpers.ranks.split_ranks import (
    LR,
    ROLES,
    WORLD_SIZE,
    RankResult,
    Wire,
    WireRecord,
    run_rank,
)
from helpers.split import (
    POST_INPUT,
    POST_LABEL,
    POST_SEED,
    SplitModels,
    build_models,
    make_optimizers,
    run_split,
)

__all__ = [
    "FAIL_MODES",
    "DistributedRun",
    "FaultPlan",
    "LaunchedWire",
    "reference_run",
    "run_distributed",
    "split_rank",
]

#: How `run_distributed(fail_rank=...)` makes a rank fail: raise an error, hang, or exit at once.
FAIL_MODES = ("raise", "hang", "exit")


@dataclass(frozen=True)
class FaultPlan:
    """A failure to cause on purpose: which rank, at the start of which step, and how."""

    rank: int
    step: int
    mode: str = "raise"

    def trigger(self) -> None:
        """Fail now, as planned."""
        if self.mode == "raise":
            raise RuntimeError(f"injected failure on rank {self.rank} at step {self.step}")
        if self.mode == "hang":
            while True:  # a rank that stops answering; only a timeout or a kill ends it
                time.sleep(3600)
        os._exit(3)  # "exit": die at once, reporting nothing


class LaunchedWire(Wire):
    """The wire of a started rank: it also tells the launcher its status at every change (so a
    waiting rank is told from a stuck one) and carries out the fault plan, if any."""

    def __init__(self, rank: int, timeout: float, fault: FaultPlan | None = None) -> None:
        super().__init__(rank, timeout)
        self.fault = fault if fault is not None and fault.rank == rank else None
        report_status(**self.status)

    def update(self, **status: Any) -> None:
        """Record what this rank is doing now, where the launcher reads it."""
        super().update(**status)
        report_status(**self.status)

    def start_step(self, step: int) -> None:
        """Step `step` begins; the planned fault, if it is this step's."""
        super().start_step(step)
        if self.fault is not None and self.fault.step == step:
            self.fault.trigger()


def split_rank(
    rank: int,
    world_size: int,
    *,
    steps: int,
    seed: int,
    lr: float,
    timeout: float,
    fault: FaultPlan | None = None,
) -> RankResult:
    """What the launcher runs on each of the three ranks: `run_rank` over a launched wire."""
    if world_size != WORLD_SIZE:
        raise ValueError(f"the split runs on exactly {WORLD_SIZE} ranks, not {world_size}")
    wire = LaunchedWire(rank, timeout, fault)
    result = run_rank(rank, steps, wire, seed=seed, lr=lr)
    wire.update(phase="done", doing="waiting for the others to finish", peer=None)
    return result


def reference_run(
    steps: int, seed: int = POST_SEED, lr: float = LR
) -> tuple[list[float], SplitModels]:
    """The same training in one process (`helpers.split.run_split`): losses and final models."""
    models = build_models(seed)
    optimizers = make_optimizers(models, lr)
    tokens, label = torch.tensor(POST_INPUT), torch.tensor(POST_LABEL)
    losses = [run_split(models, tokens, label, optimizers).loss.item() for _ in range(steps)]
    return losses, models


@dataclass
class DistributedRun:
    """The outcome of a multi-process run: losses, final parameters and the wire log."""

    steps: int
    seed: int
    losses: list[float]
    state_dicts: dict[int, dict[str, torch.Tensor]]
    wire: list[WireRecord]
    pids: list[int]

    def models(self) -> SplitModels:
        """The three models with the final parameters each rank ended with."""
        models = build_models(self.seed)
        for rank, model in enumerate(models.as_list()):
            model.load_state_dict(self.state_dicts[rank])
        return models

    def wire_table(self, steps: list[int] | None = None) -> Table:
        """The wire log as a Table (only the given steps, if any)."""
        return wire_table(self.wire, steps)


def run_distributed(
    steps: int = 5,
    *,
    seed: int = POST_SEED,
    lr: float = LR,
    timeout: float = 30.0,
    deadline: float = 120.0,
    fail_rank: int | None = None,
    fail_at_step: int = 1,
    fail_mode: str = "raise",
    start_method: str | None = None,
) -> DistributedRun:
    """Train `steps` steps with the three models in three processes on 127.0.0.1.

    `timeout` bounds every send and receive (seconds); `deadline` bounds the whole run, start-up
    included: past it, every rank is stopped. `fail_rank` makes that rank fail on purpose at
    `fail_at_step`: "raise" an error, "hang" silently, or "exit" at once without a word.
    Raises DistributedRunError (rank, step, cause) when a rank fails or the deadline passes;
    in every case all rank processes have ended when this returns or raises.
    `start_method` is "forkserver" (the default where available) or "spawn"
    (`helpers.ranks.launch.rank_context`).
    """
    if fail_rank is not None and fail_rank not in ROLES:
        raise ValueError(f"fail_rank must be one of {sorted(ROLES)} or None, not {fail_rank!r}")
    if fail_mode not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, not {fail_mode!r}")
    fault = FaultPlan(fail_rank, fail_at_step, fail_mode) if fail_rank is not None else None
    kwargs = {"steps": steps, "seed": seed, "lr": lr, "timeout": timeout, "fault": fault}
    run = run_ranks(
        split_rank, WORLD_SIZE, roles=ROLES, kwargs=kwargs, timeout=timeout, deadline=deadline,
        start_method=start_method,
    )  # fmt: skip
    return collect([run.results[r] for r in range(WORLD_SIZE)], steps, seed, run.pids)


def collect(results: list[RankResult], steps: int, seed: int, pids: list[int]) -> DistributedRun:
    """One run from the ranks' results; checks that every message sent was received as sent."""
    sent = [r for res in results for r in res.sent]
    received = [r for res in results for r in res.received]
    key = lambda r: (r.step, r.phase == "backward", r.src, r.dst)  # noqa: E731
    sent.sort(key=key)
    received.sort(key=key)
    if sent != received:
        raise DistributedRunError(
            "the ranks' wire logs disagree: a message was received differently than sent",
            {},
            pids,
        )
    order = {"activation f1": 0, "activation f2": 1, "gradient ff2.grad": 2, "gradient ff1.grad": 3}
    sent.sort(key=lambda r: (r.step, order.get(r.what, 9)))
    return DistributedRun(
        steps=steps,
        seed=seed,
        losses=results[2].losses,
        state_dicts={res.rank: res.state_dict for res in results},
        wire=sent,
        pids=pids,
    )
