"""Split learning across processes: the post's three models as three ranks of `torch.distributed`.

Rank 0 (the client) holds model 1 and the input, rank 1 holds model 2, rank 2 holds model 3 and
the labels. Forward sends activations to the next rank, backward sends gradients to the previous
one (point-to-point `dist.send`/`dist.recv`, gloo backend), and each rank steps its own optimizer.

    run = run_distributed(steps=5)   # Python or a notebook: starts three processes, collects
    python -m helpers.distributed    # the same from a shell, checked against one process
    torchrun --standalone --nproc-per-node 3 -m helpers.distributed --steps 5  # one rank each

Every rank builds all three models from the same seed and keeps only its own: that is how the
weights agree with the single-process run without sending any weights over the wire.
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
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from helpers.split import POST_INPUT, POST_LABEL, POST_SEED, SplitModels, build_models
from helpers.split import make_optimizers as _make_optimizers
from helpers.split import split_step as _split_step

__all__ = [
    "ROLES",
    "WORLD_SIZE",
    "DistributedRun",
    "DistributedRunError",
    "PeerError",
    "RankResult",
    "Wire",
    "WireRecord",
    "client_step",
    "free_port",
    "label_step",
    "loss_figure",
    "main",
    "message_shapes",
    "middle_step",
    "reference_run",
    "run_distributed",
    "run_rank",
    "sequence_figure",
    "start_forkserver",
    "still_running",
    "stop_forkserver",
    "wire_table",
]

WORLD_SIZE = 3
#: What each rank holds.
ROLES = {
    0: "client: model 1 and the input",
    1: "middle: model 2",
    2: "label holder: model 3 and the labels",
}
LR = 0.01
FAIL_MODES = ("raise", "hang", "exit")


class DistributedRunError(RuntimeError):
    """A multi-process run failed or hung; the message names the rank, step and cause."""

    def __init__(
        self,
        message: str,
        reports: dict[int, dict[str, Any]],
        pids: list[int],
        rank: int | None = None,
    ):
        super().__init__(message)
        #: The rank at fault, as far as the reports tell (None if unclear).
        self.rank = rank
        #: What each rank reported (or how it ended), by rank.
        self.reports = reports
        #: The process ids of the ranks; none of them is running any more.
        self.pids = pids


class PeerError(RuntimeError):
    """A send or receive failed because another rank failed, exited or went silent."""

    def __init__(self, message: str, peer: int, timed_out: bool = False):
        super().__init__(message)
        #: The rank this one was sending to or waiting for.
        self.peer = peer
        #: True if the peer did not answer in time (rather than closing the connection).
        self.timed_out = timed_out


@dataclass(frozen=True)
class WireRecord:
    """One message between two ranks: when, which way, what, and its payload size."""

    step: int
    phase: str
    src: int
    dst: int
    what: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @property
    def direction(self) -> str:
        """'rank 0 → rank 1'."""
        return f"rank {self.src} → rank {self.dst}"

    def as_dict(self) -> dict[str, Any]:
        """Plain values only (what goes into the result files)."""
        return {
            "step": self.step,
            "phase": self.phase,
            "src": self.src,
            "dst": self.dst,
            "what": self.what,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "nbytes": self.nbytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WireRecord:
        """The inverse of `as_dict`."""
        return cls(**{**d, "shape": tuple(d["shape"])})


@dataclass
class RankResult:
    """What one rank ends with: its model's final state, its losses (rank 2), its wire log."""

    rank: int
    state_dict: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)
    sent: list[WireRecord] = field(default_factory=list)
    received: list[WireRecord] = field(default_factory=list)


def message_shapes(
    tokens_shape: tuple[int, ...] = (1, len(POST_INPUT[0])),
    dims: tuple[int, int, int, int] = (10, 6, 6, 3),
) -> dict[str, tuple[int, ...]]:
    """The shapes every rank agrees on in advance: `dist.recv` fills a buffer of a known shape."""
    _, width, width2, _ = dims
    return {"f1": (*tokens_shape, width), "f2": (*tokens_shape, width2)}


class Wire:
    """Point-to-point messages of one rank: logged, and with clear errors when a peer is gone.

    It also keeps `status` (step, phase, what the rank is doing) and, given a `progress` file,
    writes it there at every change, so a launcher can tell a waiting rank from a stuck one.
    """

    def __init__(self, rank: int, timeout: float, progress: Path | None = None) -> None:
        self.rank = rank
        self.timeout = timeout
        self.progress = progress
        self.status: dict[str, Any] = {
            "step": 0,
            "phase": "setup",
            "doing": "starting",
            "peer": None,  # the rank this one is sending to or waiting for
        }
        self.sent: list[WireRecord] = []
        self.received: list[WireRecord] = []

    @property
    def phase(self) -> str:
        """The label of the next messages: forward or backward."""
        return self.status["phase"]

    @phase.setter
    def phase(self, value: str) -> None:
        self.update(phase=value)

    def update(self, **status: Any) -> None:
        """Record what this rank is doing now (and write it to the progress file, if any)."""
        self.status.update(status)
        if self.progress is not None:
            _write_json(self.progress, self.status)

    def _record(self, tensor: torch.Tensor, src: int, dst: int, what: str) -> WireRecord:
        return WireRecord(
            self.status["step"],
            self.status["phase"],
            src,
            dst,
            what,
            tuple(tensor.shape),
            str(tensor.dtype).removeprefix("torch."),
            tensor.numel() * tensor.element_size(),
        )

    @contextmanager
    def _talking(self, doing: str, peer: int) -> Iterator[None]:
        """Mark this rank as talking to `peer`; turn gloo's errors into a clear PeerError."""
        self.update(doing=doing, peer=peer)
        try:
            yield
        except RuntimeError as err:
            text = str(err)
            timed_out = "imed out" in text
            if timed_out:
                cause = f"no answer from rank {peer} within {self.timeout:g} s (timed out)"
            elif any(s in text for s in ("closed", "closure", "reset", "Broken pipe", "refused")):
                cause = f"rank {peer} closed the connection (it failed or exited)"
            else:
                cause = text.strip().splitlines()[0] if text.strip() else type(err).__name__
            raise PeerError(f"while {doing}: {cause}", peer, timed_out) from err
        self.update(doing="computing", peer=None)

    def send(self, tensor: torch.Tensor, dst: int, what: str) -> None:
        """Send `tensor` to rank `dst`, waiting at most `timeout` s for `dst` to take it."""
        tensor = tensor.detach().contiguous()  # values only: no graph crosses the wire
        with self._talking(f"sending {what} to rank {dst}", dst):
            dist.isend(tensor, dst).wait(timedelta(seconds=self.timeout))
        self.sent.append(self._record(tensor, self.rank, dst, what))

    def recv(self, shape: tuple[int, ...], src: int, what: str) -> torch.Tensor:
        """Receive a float32 tensor of known `shape` from rank `src`; wait at most `timeout` s."""
        buffer = torch.empty(shape)  # recv fills a buffer: the shape must be known beforehand
        with self._talking(f"waiting for {what} from rank {src}", src):
            dist.irecv(buffer, src).wait(timedelta(seconds=self.timeout))
        self.received.append(self._record(buffer, src, self.rank, what))
        return buffer


@dataclass
class _Failure:
    """A failure to inject on purpose: which rank, at which step, and how."""

    rank: int
    step: int
    mode: str = "raise"

    def maybe_trigger(self, rank: int, step: int) -> None:
        if rank != self.rank or step != self.step:
            return
        if self.mode == "raise":
            raise RuntimeError(f"injected failure on rank {rank} at step {step}")
        if self.mode == "hang":
            while True:  # a rank that stops answering; only a timeout or a kill ends it
                time.sleep(3600)
        os._exit(3)  # "exit": die at once, reporting nothing


def client_step(model: nn.Module, tokens: torch.Tensor, wire: Wire, shapes: dict) -> None:
    """Rank 0's part of one step: model 1 forward, send f1; receive ff1.grad, backward."""
    f1 = model(tokens)
    wire.send(f1, 1, "activation f1")
    wire.phase = "backward"
    f1.backward(wire.recv(shapes["f1"], 1, "gradient ff1.grad"))


def middle_step(model: nn.Module, wire: Wire, shapes: dict) -> None:
    """Rank 1's part: receive f1 as the leaf ff1, forward, send f2; backward, send ff1.grad."""
    ff1 = wire.recv(shapes["f1"], 0, "activation f1").requires_grad_(True)  # the cut
    f2 = model(ff1)
    wire.send(f2, 2, "activation f2")
    wire.phase = "backward"
    f2.backward(wire.recv(shapes["f2"], 2, "gradient ff2.grad"))
    wire.send(ff1.grad, 0, "gradient ff1.grad")


def label_step(model: nn.Module, label: torch.Tensor, wire: Wire, shapes: dict) -> float:
    """Rank 2's part: receive f2 as the leaf ff2, loss, backward, send ff2.grad; the loss."""
    ff2 = wire.recv(shapes["f2"], 1, "activation f2").requires_grad_(True)  # the cut
    _, loss = model(ff2, label)
    wire.phase = "backward"
    loss.backward()
    wire.send(ff2.grad, 1, "gradient ff2.grad")
    return loss.item()


def run_rank(
    rank: int,
    steps: int,
    *,
    seed: int = POST_SEED,
    lr: float = LR,
    timeout: float = 30.0,
    failure: _Failure | None = None,
    wire: Wire | None = None,
) -> RankResult:
    """This rank's part of `steps` training steps; needs an initialised 3-rank process group."""
    if dist.get_world_size() != WORLD_SIZE:
        raise RuntimeError(f"the split run needs {WORLD_SIZE} ranks, not {dist.get_world_size()}")
    models = build_models(seed)  # all three from the seed: the weights agree everywhere
    model = models.as_list()[rank]  # ... and this rank keeps only its own
    optimizer = _make_optimizers(models, lr)[rank]
    shapes = message_shapes()
    wire = wire if wire is not None else Wire(rank, timeout)
    tokens = torch.tensor(POST_INPUT)  # only rank 0 uses the input
    label = torch.tensor(POST_LABEL)  # only rank 2 uses the labels
    losses: list[float] = []
    for step in range(1, steps + 1):
        wire.update(step=step, phase="forward", doing="computing", peer=None)
        if failure is not None:
            failure.maybe_trigger(rank, step)
        optimizer.zero_grad()
        if rank == 0:
            client_step(model, tokens, wire, shapes)
        elif rank == 1:
            middle_step(model, wire, shapes)
        else:
            losses.append(label_step(model, label, wire, shapes))
        optimizer.step()  # each rank updates its own model only
    wire.update(phase="done", doing="finished", peer=None)
    state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return RankResult(rank, state_dict, losses, wire.sent, wire.received)


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


def _error_report(rank: int, err: BaseException, status: dict[str, Any]) -> dict[str, Any]:
    text = str(err).strip()
    return {
        "rank": rank,
        **status,
        "type": type(err).__name__,
        "message": text.splitlines()[0] if text else "",
        "peer": err.peer if isinstance(err, PeerError) else None,  # the error's cause
        "timed_out": isinstance(err, PeerError) and err.timed_out,
        "time": time.monotonic(),  # system-wide on Linux: comparable between the ranks
        "traceback": traceback.format_exc(),
    }


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
    failure: _Failure | None,
    deadline: float,
) -> None:
    """Entry point of one started process: run the rank, write its result or its error."""
    out = Path(folder)
    log = os.open(out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)  # the rank's own output goes to a file the launcher can quote
    os.dup2(log, 2)
    _exit_with_parent(deadline + 10)  # a backstop only: the launcher stops ranks first
    torch.set_num_threads(1)  # three processes on a few cores: no oversubscription
    wire = Wire(rank, timeout, progress=out / f"rank{rank}.progress")
    try:
        wire.update(doing="joining the process group")
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=WORLD_SIZE,
            timeout=timedelta(seconds=max(timeout, deadline)),  # start-up: the deadline bounds it
        )
        result = run_rank(rank, steps, seed=seed, lr=lr, failure=failure, wire=wire)
        _save_result(result, out / f"rank{rank}.pt")
        wire.update(doing="waiting for the others to finish")
        dist.barrier()  # nobody leaves while a message to it may still be in flight
        dist.destroy_process_group()
    except BaseException as err:  # report everything, then leave at once
        _write_json(out / f"rank{rank}.error", _error_report(rank, err, wire.status))
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

    def wire_table(self, steps: list[int] | None = None) -> Any:
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


def _who(rank: int) -> str:
    return f"rank {rank} ({ROLES[rank].split(':')[0]})"


def _follow(reports: dict[int, dict[str, Any]], rank: int) -> int:
    """Follow who waits for whom from `rank` to a rank that waits for nobody (or a cycle)."""
    seen = [rank]
    while (peer := reports[seen[-1]].get("peer")) is not None and peer not in seen:
        seen.append(peer)
    return seen[-1]


def _state(report: dict[str, Any]) -> str:
    if report["status"] == "error":
        return f"failed with {report['type']}: {report['message']}"
    if report["status"] == "crashed":
        return f"exited with code {report['exitcode']}"
    if report["doing"] == "computing":
        return "was computing, not waiting for any rank: stuck or too slow"
    return f"was {report['doing']}"


def _failure_message(
    reports: dict[int, dict[str, Any]], timeout: float, deadline: float
) -> tuple[str, int | None]:
    """The error message, and the rank most likely at fault (None if unclear)."""
    errors = [r for r in reports.values() if r["status"] == "error"]
    crashed = [r for r in reports.values() if r["status"] == "crashed"]
    lines: list[str] = []
    if crashed:  # a rank that died without a word is the root cause
        first = min(crashed, key=lambda r: r["rank"])
        culprit = first["rank"]
        lines.append(
            f"{_who(culprit)} exited with code {first['exitcode']} at step {first['step']} "
            f"and reported no error"
        )
        if first.get("log"):
            lines.append(f"Its last output: {first['log']}")
    elif errors:  # an error of its own first, then a peer's silence, then a closed connection
        first = min(errors, key=lambda r: (r["peer"] is not None, not r["timed_out"], r["time"]))
        culprit = _follow(reports, first["rank"])
        end = reports[culprit]
        if first["peer"] is not None and end["status"] == "stopped" and end["doing"] == "computing":
            lines.append(  # a hang: name the silent rank, not whichever neighbour timed out first
                f"{_who(culprit)} stopped answering at step {end['step']} ({end['phase']}): "
                f"it was computing, not waiting for any rank (stuck, or slower than the "
                f"{timeout:g} s timeout)"
            )
            lines.append("A rank waiting for it timed out; .reports has every rank's last state.")
        else:
            lines.append(
                f"{_who(first['rank'])} failed at step {first['step']} ({first['phase']}): "
                f"{first['type']}: {first['message']}"
            )
            if culprit != first["rank"]:
                lines.append(f"Who waits for whom leads to {_who(culprit)}: {_state(end)}.")
    else:
        lines.append(f"The run did not finish within {deadline:g} s. At the deadline:")
        for r in reports.values():
            lines.append(f"  {_who(r['rank'])}, step {r['step']}: {r['doing']}")
        ends = {_follow(reports, r) for r in reports}
        culprit = ends.pop() if len(ends) == 1 else None
        if culprit is not None and reports[culprit]["doing"] == "computing":
            lines.append(
                f"Who waits for whom leads to {_who(culprit)}: {_state(reports[culprit])}."
            )
    lines.append(f"All {WORLD_SIZE} processes have ended; none is left running.")
    return "\n".join(lines), culprit


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
    from multiprocessing.connection import wait

    if fail_rank is not None and fail_rank not in ROLES:
        raise ValueError(f"fail_rank must be one of {sorted(ROLES)} or None, not {fail_rank!r}")
    if fail_mode not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, not {fail_mode!r}")
    failure = _Failure(fail_rank, fail_at_step, fail_mode) if fail_rank is not None else None
    ctx = _context(start_method)
    with tempfile.TemporaryDirectory(prefix="split-run-") as tmp:
        folder = Path(tmp)
        port = free_port()
        processes = [
            ctx.Process(
                target=_spawned_rank,
                args=(rank, port, tmp, steps, seed, lr, timeout, failure, deadline),
                name=f"split-rank-{rank}",
                daemon=True,
            )
            for rank in range(WORLD_SIZE)
        ]
        timed_out, stopped = False, set()
        try:
            for p in processes:
                p.start()
            end = time.monotonic() + deadline
            while True:
                running = [p for p in processes if p.exitcode is None]
                if not running or any(p.exitcode for p in processes):
                    break  # all done, or one failed: stop the others at once
                left = end - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                wait([p.sentinel for p in running], timeout=left)
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
    message, culprit = _failure_message(reports, timeout, deadline)
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
# Showing a run.


def wire_table(records: list[WireRecord], steps: list[int] | None = None) -> Any:
    """What crossed between the ranks: step, phase, direction, what, shape, payload bytes."""
    from helpers.display import Table

    rows = [
        {
            "step": r.step,
            "phase": r.phase,
            "direction": r.direction,
            "what": r.what,
            "shape": str(list(r.shape)),
            "bytes": r.nbytes,
        }
        for r in records
        if steps is None or r.step in steps
    ]
    total = sum(r.nbytes for r in records)
    shown = "" if steps is None else f"; shown: step {', '.join(map(str, steps))}"
    note = f"{len(records)} messages, {total} payload bytes in all{shown}"
    return Table(["step", "phase", "direction", "what", "shape", "bytes"], rows, note=note)


def loss_figure(single: list[float], distributed: list[float]) -> Any:
    """Both runs' loss curves in one plot (the distributed one dashed, on top)."""
    from matplotlib.figure import Figure as MplFigure

    from helpers.display import Figure

    fig = MplFigure(figsize=(5.5, 3.2))
    ax = fig.add_subplot()
    steps = range(1, len(single) + 1)
    ax.plot(steps, single, "o-", color="#1f77b4", lw=4, alpha=0.45, label="one process")
    ax.plot(
        range(1, len(distributed) + 1),
        distributed,
        "x--",
        color="#d62728",
        lw=1.5,
        label="three processes",
    )
    ax.set_xlabel("training step")
    ax.set_ylabel("loss")
    ax.set_title("The same losses, in one process or three")
    ax.grid(alpha=0.3)
    ax.legend()
    return Figure(
        fig, description=f"loss curves, {len(single)} steps: one process vs three processes"
    )


def sequence_figure(records: list[WireRecord], step: int = 1) -> Any:
    """One step's messages as a sequence diagram: a lane per rank, an arrow per message."""
    from matplotlib.figure import Figure as MplFigure

    from helpers.display import Figure

    messages = [r for r in records if r.step == step]
    fig = MplFigure(figsize=(8, 0.85 * len(messages) + 1.5))
    ax = fig.add_subplot()
    xs = {rank: 3.4 * rank for rank in ROLES}
    bottom = -len(messages) - 0.4
    for rank, x in xs.items():
        ax.plot([x, x], [0.2, bottom], color="0.7", lw=1, ls="--", zorder=0)
        ax.text(
            x,
            0.35,
            f"rank {rank}\n{ROLES[rank].split(': ')[1]}",
            ha="center",
            va="bottom",
            fontsize=10,
            bbox={"boxstyle": "round", "fc": "#eef", "ec": "0.5"},
        )
    for i, r in enumerate(messages, start=1):
        color = "#1f77b4" if r.phase == "forward" else "#d62728"
        ax.annotate(
            "",
            xy=(xs[r.dst], -i),
            xytext=(xs[r.src], -i),
            arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2, "mutation_scale": 16},
        )
        middle = (xs[r.src] + xs[r.dst]) / 2
        ax.text(middle, -i + 0.07, r.what, ha="center", va="bottom", fontsize=10, color=color)
        ax.text(
            middle,
            -i - 0.07,
            f"{list(r.shape)}, {r.nbytes} B",
            ha="center",
            va="top",
            fontsize=9,
            color="0.35",
        )
    ax.set_xlim(-1.7, xs[2] + 1.7)
    ax.set_ylim(bottom, 1.3)
    ax.axis("off")
    ax.set_title(f"Step {step}: forward (blue), then backward (red); time flows down", fontsize=11)
    return Figure(fig, description=f"sequence diagram of step {step}: {len(messages)} messages")


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
    result = run_rank(rank, args.steps, timeout=args.timeout)
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
