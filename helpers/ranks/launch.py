"""The one launcher: start N ranks as processes, run one function on each, collect what it returns.

Every multi-process run of the course starts here: 07's split (`helpers.ranks.split_run`), 07b's
pipeline and DDP engines, the exercises' ranks and the command line (`python -m helpers.ranks`).
Each rank joins a gloo process group on 127.0.0.1 and runs `target(rank, world_size, **kwargs)`,
a module-level function or one defined in a notebook cell (carried to the ranks as its source by
`helpers.ranks.cell_functions`), whose return value (tensors, lists, dicts, dataclasses) comes
back to the caller. Every wait is bounded: gloo's sends, receives and collectives by `timeout`
(the process group's own timeout), the whole run by `deadline`; past it, every rank is stopped.
In every case all rank processes have ended when `run_ranks` returns or raises.

    run = run_ranks(run_stage, 3, roles=ROLES, kwargs={"schedule": "1F1B"})
    run.results[2]   # what rank 2's run_stage returned

What a rank is doing is what it last said with `doing("...")` or `report_status(...)`: when a run
fails, `helpers.ranks.failures` names the rank at fault from those last words.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from helpers.ranks.cell_functions import CarriedFunction, carry, is_cell_function, run_carried
from helpers.ranks.failures import DistributedRunError, error_report, failure_message

__all__ = [
    "PRELOAD",
    "RanksRun",
    "current_status",
    "doing",
    "exit_with_parent",
    "rank_context",
    "report_status",
    "run_ranks",
    "start_forkserver",
    "still_running",
    "stop_forkserver",
    "stop_processes",
    "wait_for_ranks",
]

#: What the forkserver imports once, so that each rank starts in milliseconds: torch, the engines
#: and dynamo (which every torch.optim optimizer imports when it is made).
PRELOAD = ["helpers.ranks.launch", "torch._dynamo", "torch.distributed.pipelining"]

# ---------------------------------------------------------------------------------------------
# Inside a started rank: what it is doing, written where the launcher reads it.

_progress: Path | None = None
_status: dict[str, Any] = {"doing": "starting"}


def report_status(**status: Any) -> None:
    """Say what this rank is doing now (merged into its status: `doing`, and for 07's wire
    `step`, `phase` and `peer`); read by the launcher if the run fails. A no-op outside a rank."""
    _status.update(status)
    if _progress is not None:
        _write_whole(_progress, json.dumps(_status))


def _write_whole(path: Path, text: str) -> None:
    """Write `text` beside `path`, then move it there: a reader never sees half of it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def doing(what: str) -> None:
    """Say what this rank is doing now, e.g. doing("computing the forward of micro-batch 2")."""
    report_status(doing=what)


def current_status() -> dict[str, Any]:
    """This rank's last status (a copy)."""
    return dict(_status)


def exit_with_parent(deadline: float) -> None:
    """Background guard in a started rank: exit if the launcher dies or the deadline passes."""
    import multiprocessing

    parent = multiprocessing.parent_process()  # watches the launcher through a pipe

    def watch() -> None:
        if parent is not None:
            parent.join(deadline)  # returns early when the launcher is gone
            os._exit(4 if not parent.is_alive() else 5)
        time.sleep(deadline)
        os._exit(5)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _group_store(folder: Path, rank: int, world_size: int, deadline: float) -> dist.TCPStore:
    """The process group's store, on 127.0.0.1. Rank 0 opens it on a port the system picks as
    it binds (a port found free beforehand and bound a moment later can be taken in between by
    any other program's connection) and writes the port into `folder`; the other ranks read it
    there. Every wait, for the file and for the others, is bounded by `deadline`."""
    wait = timedelta(seconds=deadline)
    written = folder / "store.port"
    if rank == 0:
        store = dist.TCPStore(
            "127.0.0.1", 0, world_size, True, timeout=wait, wait_for_workers=False
        )
        _write_whole(written, str(store.port))
        return store
    give_up = time.monotonic() + deadline
    while not written.exists():
        if time.monotonic() > give_up:
            raise TimeoutError(
                f"rank 0 did not open the process group's store within {deadline:g} s"
            )
        time.sleep(0.01)
    return dist.TCPStore("127.0.0.1", int(written.read_text()), world_size, False, timeout=wait)


def _rank_entry(
    target: Callable[..., Any],
    rank: int,
    world_size: int,
    folder: str,
    kwargs: dict[str, Any],
    timeout: float,
    deadline: float,
) -> None:
    """One started process: join the group, run `target`, write its result or its error."""
    global _progress
    out = Path(folder)
    log = os.open(out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)  # the rank's own output goes to a file the launcher can quote
    os.dup2(log, 2)
    exit_with_parent(deadline + 10)  # a backstop only: the launcher stops ranks first
    torch.set_num_threads(1)  # several processes on a few cores: no oversubscription
    _progress = out / f"rank{rank}.progress"
    try:
        doing("joining the process group")
        # Waiting for the others to start is bounded by the deadline (a loaded machine starts
        # processes slowly); every send, receive and collective after that by `timeout`.
        store = _group_store(out, rank, world_size, deadline)
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=world_size,
            timeout=timedelta(seconds=timeout),
        )  # fmt: skip
        carried = kwargs.get("carried")
        name = carried.name if isinstance(carried, CarriedFunction) else target.__name__
        doing(f"running {name}()")
        result = target(rank, world_size, **kwargs)
        tmp = out / f"rank{rank}.tmp"
        torch.save(result, tmp)
        tmp.replace(out / f"rank{rank}.pt")  # atomic: the launcher never reads half a file
        doing("waiting for the others to finish")
        dist.barrier()  # nobody leaves while a message to it may still be in flight
        dist.destroy_process_group()
    except BaseException as err:  # report everything, then leave at once
        report = error_report(rank, err, current_status())
        (out / f"rank{rank}.error").write_text(json.dumps(report))
        sys.stdout.flush()
        os._exit(1)


# ---------------------------------------------------------------------------------------------
# The launcher's side: processes, the forkserver.


def still_running(pids: list[int]) -> list[int]:
    """The process ids in `pids` that are still running (zombies count as ended)."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the process exists
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        stat = Path(f"/proc/{pid}/stat")
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except (OSError, IndexError):
            pass
        alive.append(pid)
    return alive


def stop_processes(processes: list[Any], grace: float = 2.0) -> set[int]:
    """Terminate every process still running, kill it if it ignores that, and reap it.

    Returns the ranks (indices) that were still running.
    """
    started = [(i, p) for i, p in enumerate(processes) if p.pid is not None]
    stopped = {i for i, p in started if p.is_alive()}
    for i in stopped:
        processes[i].terminate()
    end = time.monotonic() + grace
    for _, p in started:
        p.join(max(0.0, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    return stopped


def wait_for_ranks(processes: list[Any], deadline: float) -> bool:
    """Wait until every process has ended, or one has failed (exit code not 0), or `deadline`
    seconds have passed; True when the deadline passed."""
    from multiprocessing.connection import wait

    end = time.monotonic() + deadline
    while True:
        running = [p for p in processes if p.exitcode is None]
        if not running or any(p.exitcode for p in processes):
            return False  # all done, or one failed: the caller stops the others at once
        left = end - time.monotonic()
        if left <= 0:
            return True
        wait([p.sentinel for p in running], timeout=left)


def rank_context(start_method: str | None = None) -> Any:
    """How the ranks start: never a plain fork of the (threaded) caller.

    "spawn" starts a fresh interpreter per rank, which then imports torch: seconds per rank.
    "forkserver" spawns one clean server process that imports PRELOAD once; each rank is then
    forked from that server in milliseconds. The server lives as long as the calling process (a
    notebook's kernel), then exits with it; `stop_forkserver()` ends it sooner. The default is
    the forkserver where there is one (Linux, macOS), else spawn (Windows).
    """
    import multiprocessing as mp

    if start_method is None:
        start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if start_method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method must be 'forkserver' or 'spawn', not {start_method!r}")
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_forkserver() -> bool:
    """Start the forkserver now, without waiting: it imports torch while the caller works on.

    Returns False where there is no forkserver (Windows): ranks are then spawned.
    """
    import multiprocessing as mp
    from multiprocessing import forkserver

    if "forkserver" not in mp.get_all_start_methods():
        return False
    rank_context("forkserver")  # sets what the server imports
    forkserver.ensure_running()
    return True


def stop_forkserver() -> dict[str, int]:
    """End the forkserver and multiprocessing's resource tracker; return {name: pid} of those ended.

    Both outlive a run, so the next run starts at once, and both end when the kernel ends. But a
    kernel shutting down first signals its child processes and waits for them to go, and the
    resource tracker ignores SIGTERM: with them alive, a kernel restart takes seconds longer.
    The next run starts them again. Uses the stop methods CPython's own tests use (`_stop`);
    where a Python has none, nothing is stopped and {} is returned.
    """
    from multiprocessing import forkserver, resource_tracker

    ended = {}
    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None and hasattr(server, "_stop"):
        # SIGTERM ends it at once (it installs no handler for it, and holds nothing worth saving);
        # left to exit by itself, it would first tear down its imported torch, about a second.
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        server._stop()  # closes the server's "alive" pipe and reaps it
        ended["forkserver"] = pid
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    pid = getattr(tracker, "_pid", None)
    if pid is not None and hasattr(tracker, "_stop"):
        tracker._stop()  # the same: closes its pipe, waits
        ended["resource tracker"] = pid
    return ended


@dataclass
class RanksRun:
    """What each rank returned, by rank, and the process ids (all ended)."""

    results: dict[int, Any]
    pids: list[int]


def run_ranks(
    target: Callable[..., Any],
    world_size: int,
    *,
    roles: Mapping[int, str] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 30.0,
    deadline: float = 120.0,
    start_method: str | None = None,
) -> RanksRun:
    """Run `target(rank, world_size, **kwargs)` on `world_size` ranks; return what each returned.

    Raises DistributedRunError (the rank at fault, what it was doing, the cause) when a rank
    fails or the deadline passes. In every case all rank processes have ended when this returns.
    `start_method` is "forkserver" (the default where there is one) or "spawn" (`rank_context`).
    """
    if not callable(target) or "<" in getattr(target, "__qualname__", "<"):
        raise TypeError(
            "run_ranks() needs a function defined with def at the top level of a module or of a "
            f"notebook cell, not {target!r}"
        )
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number, 1 or more, not {world_size!r}")
    if is_cell_function(target):  # the ranks cannot import it: they get its source
        kwargs = {**dict(kwargs or {}), "carried": carry(target)}
        target = run_carried
    roles = dict(roles or {})
    ctx = rank_context(start_method)
    with tempfile.TemporaryDirectory(prefix="ranks-") as tmp:
        folder = Path(tmp)
        processes = [
            ctx.Process(
                target=_rank_entry,
                args=(target, rank, world_size, tmp, dict(kwargs or {}), timeout, deadline),
                name=f"rank-{rank}",
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
            stopped = stop_processes(processes)
        pids = [p.pid for p in processes]
        codes = [p.exitcode for p in processes]
        if not timed_out and all(code == 0 for code in codes):
            results = {
                rank: torch.load(folder / f"rank{rank}.pt", weights_only=False)
                for rank in range(world_size)
            }
            return RanksRun(results, pids)
        reports = {
            rank: _report(folder, rank, code, rank in stopped) for rank, code in enumerate(codes)
        }
    message, culprit = failure_message(reports, roles, timeout, deadline)
    raise DistributedRunError(message, reports, pids, culprit)


def _report(folder: Path, rank: int, exitcode: int | None, stopped: bool) -> dict[str, Any]:
    """How one rank ended: finished, reported an error, crashed silently, or was stopped."""
    progress = folder / f"rank{rank}.progress"
    status = json.loads(progress.read_text()) if progress.exists() else {"doing": "starting"}
    base = {"rank": rank, **status, "exitcode": exitcode}
    error = folder / f"rank{rank}.error"
    if error.exists():
        return {**base, **json.loads(error.read_text()), "status": "error"}
    if exitcode == 0:
        return {**base, "status": "finished"}
    if stopped:  # still running when the launcher stopped it
        return {**base, "status": "stopped"}
    log = folder / f"rank{rank}.log"
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    return {**base, "status": "crashed", "log": tail[0] if tail else ""}
