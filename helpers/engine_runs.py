"""The launcher for PyTorch's own engines: start N ranks, run one function on each, collect.

Notebook 07b runs `torch.distributed.pipelining` and `DistributedDataParallel` in real processes.
Each rank joins a gloo process group on 127.0.0.1 and runs `target(rank, world_size, **kwargs)`,
a module-level function whose return value (tensors, lists, dicts, dataclasses) comes back to the
caller. Every wait is bounded: each of gloo's sends, receives and all-reduces by `timeout` (the
process group's own timeout), the whole run by `deadline`. When a rank fails, the error names it
and what it was doing; a rank that hangs is named by what its neighbours saw.

    run = run_ranks(run_stage, 3, roles=ROLES, kwargs={"schedule": "1F1B"})
    run.results[2]   # what rank 2's run_stage returned

From a shell: `python -m helpers.engines` (that module says how, torchrun included).

What a rank is doing is what it last said with `doing("...")` (the engines' wrappers in
`helpers.pipeline_ranks` say "computing the forward of micro-batch 2", for instance).
07's own launcher (`helpers.distributed`) does the same for its hand-written wire; the process
plumbing (forkserver, free port, stopping and reaping) is shared with it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from helpers.distributed import _exit_with_parent, _stop, free_port, wait_for_ranks
from helpers.rank_failures import DistributedRunError

__all__ = [
    "EngineRun",
    "doing",
    "engine_failure",
    "run_ranks",
    "start_forkserver",
]

#: What the forkserver imports once, so that each rank starts in milliseconds.
PRELOAD = ["helpers.engine_runs", "torch._dynamo", "torch.distributed.pipelining"]
#: gloo's words when a peer went silent or away: a symptom in the waiting rank, not a cause.
_SYMPTOM = re.compile(r"timed out|timeout|connection (closed|reset)|broken pipe|peer", re.I)
_progress: Path | None = None


def doing(what: str) -> None:
    """Say what this rank is doing now (read by the launcher if the run fails); a no-op outside."""
    if _progress is not None:
        tmp = _progress.with_suffix(".tmp")
        tmp.write_text(json.dumps({"doing": what, "time": time.time()}))
        tmp.replace(_progress)


@dataclass
class EngineRun:
    """What each rank returned, by rank, and the process ids (all ended)."""

    results: dict[int, Any]
    pids: list[int]


def _context() -> Any:
    """A forkserver (Linux, macOS) that imported torch and the engines once; else spawn."""
    import multiprocessing as mp

    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_forkserver() -> bool:
    """Start the forkserver now (it imports torch and the engines while the caller works on).

    Returns False where there is none (Windows): ranks are then spawned. `stop_forkserver()`
    from `helpers.distributed` ends it.
    """
    from multiprocessing import forkserver

    if _context().get_start_method() != "forkserver":
        return False
    forkserver.ensure_running()
    return True


def _rank_entry(
    target: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    folder: str,
    kwargs: dict[str, Any],
    timeout: float,
    deadline: float,
) -> None:
    """One started process: join the group, run `target`, write its result or its error."""
    global _progress
    out = Path(folder)
    log = os.open(out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _exit_with_parent(deadline + 10)  # a backstop: the launcher stops ranks first
    torch.set_num_threads(1)  # several processes on a few cores: no oversubscription
    _progress = out / f"rank{rank}.progress"
    try:
        doing("joining the process group")
        # Waiting for the others to start is bounded by the deadline (a loaded machine starts
        # processes slowly); every send, receive and all-reduce after that by `timeout`.
        store = dist.TCPStore(
            "127.0.0.1", port, world_size, rank == 0, timeout=timedelta(seconds=deadline)
        )
        dist.init_process_group(
            "gloo",
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
        )
        result = target(rank, world_size, **kwargs)
        torch.save(result, out / f"rank{rank}.pt")
        doing("waiting for the others to finish")
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as err:
        text = str(err).strip()
        report = {
            "type": type(err).__name__,
            "message": text,
            "time": time.time(),
            "traceback": traceback.format_exc()[-4000:],  # for whoever debugs the rank
        }
        (out / f"rank{rank}.error").write_text(json.dumps(report))
        sys.stdout.flush()
        os._exit(1)


def _report(folder: Path, rank: int, exitcode: int | None, stopped: bool) -> dict[str, Any]:
    """How one rank ended: finished, error (with its message), crashed, or stopped."""
    progress = folder / f"rank{rank}.progress"
    status = json.loads(progress.read_text()) if progress.exists() else {"doing": "starting"}
    base = {"rank": rank, "doing": status["doing"], "exitcode": exitcode}
    error = folder / f"rank{rank}.error"
    if error.exists():
        return {**base, **json.loads(error.read_text()), "status": "error"}
    if exitcode == 0:
        return {**base, "status": "finished"}
    if stopped:
        return {**base, "status": "stopped"}
    return {**base, "status": "crashed"}


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def engine_failure(
    reports: Mapping[int, dict[str, Any]], roles: Mapping[int, str], deadline: float
) -> tuple[str, int | None]:
    """The error message for a failed run, and the rank at fault (None if unclear).

    A rank's own error comes first; a rank that was stopped while computing comes next (it hung:
    its neighbours' timeouts are the symptom); then a rank that exited without a word.
    """

    def who(rank: int) -> str:
        return f"rank {rank} ({roles.get(rank, 'rank')})"

    errors = sorted(
        (r for r in reports.values() if r["status"] == "error"), key=lambda r: r["time"]
    )
    own = [r for r in errors if not _SYMPTOM.search(r["message"])]
    hung = [
        r for r in reports.values() if r["status"] == "stopped" and r["doing"].startswith("comput")
    ]
    crashed = [r for r in reports.values() if r["status"] == "crashed"]
    lines = []
    if own:
        first = own[0]
        culprit = first["rank"]
        lines.append(
            f"{who(culprit)} failed while {first['doing']}: "
            f"{first['type']}: {_first_line(first['message'])}"
        )
    elif hung:
        culprit = hung[0]["rank"]
        lines.append(f"{who(culprit)} stopped answering while {hung[0]['doing']}")
        if errors:  # which neighbour gave up first is a race: .reports has them all
            lines.append("A rank waiting for it timed out; .reports has every rank's last state.")
    elif crashed:
        culprit = crashed[0]["rank"]
        lines.append(
            f"{who(culprit)} exited with code {crashed[0]['exitcode']} while "
            f"{crashed[0]['doing']} and reported no error"
        )
    elif errors:
        culprit = errors[0]["rank"]
        lines.append(
            f"{who(culprit)} failed while {errors[0]['doing']}: "
            f"{errors[0]['type']}: {_first_line(errors[0]['message'])}"
        )
    else:
        culprit = None
        lines.append(f"The run did not finish within {deadline:g} s. At the deadline:")
        for r in reports.values():
            lines.append(f"  {who(r['rank'])}: {r['doing']}")
    lines.append(f"All {len(reports)} processes have ended; none is left running.")
    return "\n".join(lines), culprit


def run_ranks(
    target: Callable[..., Any],
    world_size: int,
    *,
    roles: Mapping[int, str] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 30.0,
    deadline: float = 120.0,
) -> EngineRun:
    """Run `target(rank, world_size, **kwargs)` on `world_size` ranks; return what each returned.

    Raises DistributedRunError (the rank at fault, what it was doing, the cause) when a rank
    fails or the deadline passes. In every case all rank processes have ended when this returns.
    """

    if not callable(target) or "<" in getattr(target, "__qualname__", "<"):
        raise TypeError(
            "run_ranks() needs a function defined at the top level of a module (the ranks "
            f"import it by name), not {target!r}"
        )
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number, 1 or more, not {world_size!r}")
    roles = dict(roles or {})
    ctx = _context()
    with tempfile.TemporaryDirectory(prefix="engine-run-") as tmp:
        folder = Path(tmp)
        port = free_port()
        processes = [
            ctx.Process(
                target=_rank_entry,
                args=(target, rank, world_size, port, tmp, dict(kwargs or {}), timeout, deadline),
                name=f"engine-rank-{rank}",
                daemon=True,
            )
            for rank in range(world_size)
        ]
        timed_out = False
        try:
            for p in processes:
                p.start()
            timed_out = wait_for_ranks(processes, deadline)
            if any(p.exitcode for p in processes):
                time.sleep(min(1.0, timeout))  # let the neighbours' timeouts report, briefly
        finally:
            stopped = _stop(processes)
        pids = [p.pid for p in processes]
        codes = [p.exitcode for p in processes]
        if not timed_out and all(code == 0 for code in codes):
            results = {
                rank: torch.load(folder / f"rank{rank}.pt", weights_only=False)
                for rank in range(world_size)
            }
            return EngineRun(results, pids)
        reports = {
            rank: _report(folder, rank, code, rank in stopped) for rank, code in enumerate(codes)
        }
    message, culprit = engine_failure(reports, roles, deadline)
    raise DistributedRunError(message, reports, pids, culprit)
