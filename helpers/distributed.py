"""The launcher: start the three ranks of a split run as processes, collect what they end with.

What each rank runs (the wire, its part of a step) is `helpers.split_ranks`; naming the rank at
fault when a run fails or hangs is `helpers.rank_failures`; figures and tables of a run are
`helpers.split_display`. This module starts the processes (forkserver or spawn, a free port on
127.0.0.1), waits for them within a deadline, stops and reaps them all in every case, and reads
back each rank's results, or its error.

    run = run_distributed(steps=5)   # Python or a notebook: starts three processes, collects
    python -m helpers.distributed    # the same from a shell, checked against one process
    torchrun --standalone --nproc-per-node 3 -m helpers.distributed --steps 5  # one rank each

Demonstrating failures is the launcher's job too: `run_distributed(fail_rank=...)` hands the
started rank a fault plan, and its wire triggers the fault when the step begins. The functions
that are taught never see it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from helpers.display import Table
from helpers.rank_failures import DistributedRunError, error_report, failure_message
from helpers.split import POST_INPUT, POST_LABEL, POST_SEED, SplitModels, build_models
from helpers.split import make_optimizers as _make_optimizers
from helpers.split import split_step as _split_step
from helpers.split_display import wire_table
from helpers.split_ranks import LR, ROLES, WORLD_SIZE, RankResult, Wire, WireRecord, run_rank

__all__ = [
    "FAIL_MODES",
    "DistributedRun",
    "free_port",
    "main",
    "reference_run",
    "run_distributed",
    "start_forkserver",
    "still_running",
    "stop_forkserver",
]

#: How `run_distributed(fail_rank=...)` makes a rank fail: raise an error, hang, or exit at once.
FAIL_MODES = ("raise", "hang", "exit")



# ---------------------------------------------------------------------------------------------
# Failures on purpose: a fault plan the launcher hands to one started rank.


@dataclass(frozen=True)
class _FaultPlan:
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


class _LaunchedWire(Wire):
    """The wire of a started rank: it also writes its status to a file at every change (so the
    launcher can tell a waiting rank from a stuck one) and carries out the fault plan, if any."""

    def __init__(
        self, rank: int, timeout: float, progress: Path, fault: _FaultPlan | None = None
    ) -> None:
        super().__init__(rank, timeout)
        self.progress = progress
        self.fault = fault if fault is not None and fault.rank == rank else None

    def update(self, **status: Any) -> None:
        """Record what this rank is doing now, and write it where the launcher reads it."""
        super().update(**status)
        _write_json(self.progress, self.status)

    def start_step(self, step: int) -> None:
        """Step `step` begins; the planned fault, if it is this step's."""
        super().start_step(step)
        if self.fault is not None and self.fault.step == step:
            self.fault.trigger()


def reference_run(
    steps: int, seed: int = POST_SEED, lr: float = LR
) -> tuple[list[float], SplitModels]:
    """The same training in one process (`helpers.split.split_step`): losses and final models."""
    models = build_models(seed)
    optimizers = _make_optimizers(models, lr)
    tokens, label = torch.tensor(POST_INPUT), torch.tensor(POST_LABEL)
    losses = [_split_step(models, tokens, label, optimizers).loss.item() for _ in range(steps)]
    return losses, models


# ---------------------------------------------------------------------------------------------
# Result files: how ranks hand their results (or their error) back to the launcher.


def _save_result(result: RankResult, path: Path) -> None:
    payload = {
        "rank": result.rank,
        "state_dict": result.state_dict,
        "losses": result.losses,
        "sent": [r.as_dict() for r in result.sent],
        "received": [r.as_dict() for r in result.received],
    }
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # atomic: the launcher never reads half a file


def _load_result(path: Path) -> RankResult:
    d = torch.load(path, weights_only=True)
    return RankResult(
        d["rank"],
        d["state_dict"],
        list(d["losses"]),
        [WireRecord.from_dict(r) for r in d["sent"]],
        [WireRecord.from_dict(r) for r in d["received"]],
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _exit_with_parent(deadline: float) -> None:
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


def _spawned_rank(
    rank: int,
    port: int,
    folder: str,
    steps: int,
    seed: int,
    lr: float,
    timeout: float,
    fault: _FaultPlan | None,
    deadline: float,
) -> None:
    """Entry point of one started process: run the rank, write its result or its error."""
    out = Path(folder)
    log = os.open(out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)  # the rank's own output goes to a file the launcher can quote
    os.dup2(log, 2)
    _exit_with_parent(deadline + 10)  # a backstop only: the launcher stops ranks first
    torch.set_num_threads(1)  # three processes on a few cores: no oversubscription
    wire = _LaunchedWire(rank, timeout, out / f"rank{rank}.progress", fault)
    try:
        wire.update(doing="joining the process group")
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=WORLD_SIZE,
            timeout=timedelta(seconds=max(timeout, deadline)),  # start-up: the deadline bounds it
        )
        result = run_rank(rank, steps, wire, seed=seed, lr=lr)
        _save_result(result, out / f"rank{rank}.pt")
        wire.update(phase="done", doing="waiting for the others to finish", peer=None)
        dist.barrier()  # nobody leaves while a message to it may still be in flight
        dist.destroy_process_group()
    except BaseException as err:  # report everything, then leave at once
        _write_json(out / f"rank{rank}.error", error_report(rank, err, wire.status))
        sys.stdout.flush()
        os._exit(1)


# ---------------------------------------------------------------------------------------------
# The launcher.


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now: bind to port 0 and let the system pick one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def _stop(processes: list[Any], grace: float = 2.0) -> set[int]:
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


def _context(start_method: str | None) -> Any:
    """How the ranks start: never a plain fork of the (threaded) caller.

    "spawn" starts a fresh interpreter per rank, which then imports torch: seconds per rank.
    "forkserver" spawns one clean server process that imports torch (and torch._dynamo, which
    every torch.optim optimizer imports when it is created) once; each rank is then forked from
    that server in milliseconds. The server lives as long as the calling process (a notebook's
    kernel), then exits with it; `stop_forkserver()` ends it sooner.
    """
    import multiprocessing as mp

    if start_method is None:
        start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if start_method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method must be 'forkserver' or 'spawn', not {start_method!r}")
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["helpers.distributed", "torch._dynamo"])
    return ctx


def start_forkserver() -> bool:
    """Start the forkserver now, without waiting: it imports torch while the caller works on.

    Returns False where there is no forkserver (Windows): ranks are then spawned.
    """
    import multiprocessing as mp
    from multiprocessing import forkserver

    if "forkserver" not in mp.get_all_start_methods():
        return False
    _context("forkserver")  # sets what the server imports
    forkserver.ensure_running()
    return True


def stop_forkserver() -> dict[str, int]:
    """End the forkserver and multiprocessing's resource tracker; return {name: pid} of those ended.

    Both outlive a run, so the next run starts at once, and both end when the kernel ends. But a
    kernel shutting down first signals its child processes and waits for them to go, and the
    resource tracker ignores SIGTERM: with them alive, a kernel restart takes seconds longer.
    The next `run_distributed` starts them again. Uses the stop methods CPython's own tests use
    (`_stop`); where a Python has none, nothing is stopped and {} is returned.
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
    `start_method` is "forkserver" (the default where available) or "spawn"; see `_context`.
    """

    if fail_rank is not None and fail_rank not in ROLES:
        raise ValueError(f"fail_rank must be one of {sorted(ROLES)} or None, not {fail_rank!r}")
    if fail_mode not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, not {fail_mode!r}")
    fault = _FaultPlan(fail_rank, fail_at_step, fail_mode) if fail_rank is not None else None
    ctx = _context(start_method)
    with tempfile.TemporaryDirectory(prefix="split-run-") as tmp:
        folder = Path(tmp)
        port = free_port()
        processes = [
            ctx.Process(
                target=_spawned_rank,
                args=(rank, port, tmp, steps, seed, lr, timeout, fault, deadline),
                name=f"split-rank-{rank}",
                daemon=True,
            )
            for rank in range(WORLD_SIZE)
        ]
        timed_out, stopped = False, set()
        try:
            for p in processes:
                p.start()
            timed_out = wait_for_ranks(processes, deadline)
        finally:
            stopped = _stop(processes)
        pids = [p.pid for p in processes]
        exitcodes = [p.exitcode for p in processes]
        if not timed_out and all(code == 0 for code in exitcodes):
            results = [_load_result(folder / f"rank{r}.pt") for r in range(WORLD_SIZE)]
            return _collect(results, steps, seed, pids)
        reports = {
            rank: _rank_report(folder, rank, code, rank in stopped)
            for rank, code in enumerate(exitcodes)
        }
    message, culprit = failure_message(reports, timeout, deadline)
    raise DistributedRunError(message, reports, pids, culprit)


def _rank_report(folder: Path, rank: int, exitcode: int | None, stopped: bool) -> dict[str, Any]:
    """How one rank ended: finished, reported an error, crashed silently, or was stopped."""
    progress = folder / f"rank{rank}.progress"
    status = {"step": 0, "phase": "setup", "doing": "starting", "peer": None}
    if progress.exists():
        status.update(json.loads(progress.read_text()))
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


def _collect(results: list[RankResult], steps: int, seed: int, pids: list[int]) -> DistributedRun:
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


# ---------------------------------------------------------------------------------------------
# Command line: one rank under torchrun, or the whole run spawned locally.


def _torchrun_rank(args: argparse.Namespace) -> int:
    """Run one rank as torchrun started it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""
    world = int(os.environ["WORLD_SIZE"])
    if world != WORLD_SIZE:
        print(
            f"helpers.distributed needs exactly {WORLD_SIZE} processes, got WORLD_SIZE={world}: "
            "use torchrun --nproc-per-node 3 (one machine) or --nnodes 3 --nproc-per-node 1",
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))  # env:// from torchrun
    rank = dist.get_rank()
    result = run_rank(rank, args.steps, Wire(rank, args.timeout))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        _save_result(result, Path(args.out) / f"rank{rank}.pt")
    sent = sum(r.nbytes for r in result.sent)
    got = sum(r.nbytes for r in result.received)
    print(
        f"[rank {rank}] {ROLES[rank]}: {args.steps} steps, "
        f"sent {len(result.sent)} messages ({sent} B), received {len(result.received)} ({got} B)",
        flush=True,
    )
    if rank == 2:
        print("[rank 2] losses: " + ", ".join(f"{v:.4f}" for v in result.losses), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _local_run(args: argparse.Namespace) -> int:
    """Spawn the three ranks here and compare with the single-process run."""
    run = run_distributed(args.steps, timeout=args.timeout)
    losses, models = reference_run(args.steps)
    print(wire_table(run.wire, [1]))
    print()
    for step, (a, b) in enumerate(zip(losses, run.losses, strict=True), start=1):
        print(f"step {step}: loss {b:.4f} (three processes), {a:.4f} (one process)")
    torch.testing.assert_close(torch.tensor(run.losses), torch.tensor(losses))
    final = run.models().named_parameters()
    for name, p in models.named_parameters().items():
        torch.testing.assert_close(final[name], p)
    print("losses and final parameters equal the single-process run")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.distributed [--steps N]`: under torchrun one rank, else all three."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.distributed",
        description="Split learning with three ranks (gloo). Under torchrun, runs one rank; "
        "otherwise spawns all three on 127.0.0.1 and checks them against one process.",
    )
    parser.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds any rank waits for another"
    )
    parser.add_argument("--out", help="under torchrun: write each rank's result into this folder")
    args = parser.parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return _torchrun_rank(args)
    return _local_run(args)


if __name__ == "__main__":
    sys.exit(main())
