"""The one launcher (helpers.ranks.launch): naming the rank at fault, bad input, and the command
line (python -m helpers.ranks), with fake reports where no process is needed."""

from __future__ import annotations

import multiprocessing
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.ranks import launch
from helpers.ranks.failures import DistributedRunError, failure_message
from helpers.ranks.launch import doing, run_ranks, still_running

ROOT = Path(__file__).resolve().parents[2]
ROLES = {0: "first", 1: "second"}


def report(rank, status, doing="in the schedule", message="", when=0.0):
    out = {"rank": rank, "status": status, "doing": doing, "exitcode": None}
    if status == "error":
        out.update(type="RuntimeError", message=message, time=when)
    return out


def test_an_error_of_its_own_is_named_before_a_neighbours_timeout():
    reports = {
        0: report(0, "error", message="Timed out waiting 1000ms for recv", when=1.0),
        1: report(1, "error", "computing the forward of micro-batch 2", "boom\nmore", when=2.0),
    }
    message, culprit = failure_message(reports, ROLES, 30, 60)
    assert culprit == 1
    assert message.splitlines()[0] == (
        "rank 1 (second) failed while computing the forward of micro-batch 2: RuntimeError: boom"
    )
    assert message.splitlines()[-1] == "All 2 processes have ended; none is left running."


def test_a_hang_names_the_rank_still_computing():
    reports = {
        0: report(0, "error", message="Connection closed by peer", when=1.0),
        1: report(1, "stopped", "computing the backward of micro-batch 0"),
    }
    message, culprit = failure_message(reports, ROLES, 30, 60)
    assert culprit == 1 and message.splitlines()[:2] == [
        "rank 1 (second) stopped answering while computing the backward of micro-batch 0, not "
        "waiting for any rank (stuck, or slower than the 30 s timeout)",
        "A rank waiting for it timed out; .reports has every rank's last state.",
    ]
    alone, _ = failure_message({1: reports[1]}, ROLES, 30, 60)
    assert "timed out" not in alone  # no neighbour said so


def test_a_silent_exit_and_the_deadline_are_said_as_such():
    crashed = {0: {**report(0, "crashed", "computing"), "exitcode": -9}, 1: report(1, "stopped")}
    message, culprit = failure_message(crashed, ROLES, 30, 60)
    assert culprit == 0
    assert message.startswith("rank 0 (first) exited with code -9 while computing and reported")
    late = {0: report(0, "stopped", "waiting"), 1: report(1, "stopped", "sending")}
    message, culprit = failure_message(late, ROLES, 30, 5)
    assert culprit is None and message.splitlines()[:3] == [
        "The run did not finish within 5 s. At the deadline:",
        "  rank 0 (first): waiting",
        "  rank 1 (second): sending",
    ]
    symptoms = {0: report(0, "error", "waiting", "Timed out", 1.0), 1: report(1, "stopped")}
    message, culprit = failure_message(symptoms, ROLES, 30, 5)
    assert culprit == 0 and message.startswith("rank 0 (first) failed while waiting: Runtime")


def _says_hello(rank, world_size, greeting="hello"):
    doing("greeting")
    return f"{greeting} from {rank} of {world_size}"


def _raises_on_one(rank, world_size):
    doing("checking the input")
    if rank == 1:
        raise ValueError("a bad input on rank 1")
    import torch
    import torch.distributed as dist

    dist.barrier()
    return torch.zeros(1)


def test_every_rank_runs_the_function_and_returns_its_value():
    run = run_ranks(_says_hello, 2, kwargs={"greeting": "hi"})
    assert run.results == {0: "hi from 0 of 2", 1: "hi from 1 of 2"}
    assert still_running(run.pids) == [] and multiprocessing.active_children() == []


def test_a_port_another_program_holds_does_not_stop_a_run(monkeypatch):
    """Rank 0 opens the group's store on a port the system gives it as it binds: a port found
    free beforehand (bound to port 0, then let go) and taken by another program before rank 0
    binds it would fail the run."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        monkeypatch.setattr(launch, "free_port", lambda *_: taken, raising=False)
        run = run_ranks(_says_hello, 2)
    assert run.results == {0: "hello from 0 of 2", 1: "hello from 1 of 2"}


def test_the_group_store_is_found_through_the_port_rank_0_writes(tmp_path):
    stores = {}

    def join(rank):
        stores[rank] = launch._group_store(tmp_path, rank, 2, deadline=30)

    late = threading.Thread(target=join, args=(1,))
    late.start()  # rank 1 waits for rank 0's file
    time.sleep(0.2)
    join(0)
    late.join(30)
    stores[1].set("from rank 1", "hi")
    assert stores[0].get("from rank 1") == b"hi"
    assert int((tmp_path / "store.port").read_text()) == stores[0].port == stores[1].port


def test_a_rank_without_rank_0_gives_up_at_the_deadline(tmp_path):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="rank 0 did not open the process group's store within"):
        launch._group_store(tmp_path, 1, 2, deadline=0.3)
    assert 0.3 <= time.monotonic() - start < 5


def test_a_failing_rank_is_named_and_no_process_is_left():
    with pytest.raises(DistributedRunError) as caught:
        run_ranks(_raises_on_one, 2, roles=ROLES, timeout=2)
    assert str(caught.value).startswith(
        "rank 1 (second) failed while checking the input: ValueError: a bad input on rank 1"
    )
    assert still_running(caught.value.pids) == []


def test_bad_input_says_what_to_pass():
    with pytest.raises(TypeError, match="top level of a module"):
        run_ranks(lambda rank, size: rank, 2)
    with pytest.raises(TypeError, match="top level of a module"):
        run_ranks("run_stage", 2)
    with pytest.raises(ValueError, match="whole number, 1 or more, not 0"):
        run_ranks(_says_hello, 0)


def test_doing_outside_a_rank_does_nothing():
    doing("nothing to report")  # no progress file: no error


@pytest.mark.parametrize(("engine", "ranks"), [("pipeline", 3), ("ddp", 2)])
def test_the_command_line_checks_every_rank(engine, ranks):
    done = subprocess.run(
        [sys.executable, "-m", "helpers.ranks", engine],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == ranks and all("equal one process" in line for line in lines)


def test_torchrun_runs_the_same_ranks():
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "3", "-m", "helpers.ranks",
         "pipeline", "--schedule", "1F1B"],
        capture_output=True, text=True, timeout=180, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # three processes share one stdout: their lines may interleave, so count, do not split
    assert sorted(re.findall(r"rank (\d) \(", done.stdout)) == ["0", "1", "2"]
    assert done.stdout.count("gradients equal one process") == 3


def test_torchrun_with_the_wrong_number_of_processes_says_how_many():
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "helpers.ranks", "pipeline"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--nproc-per-node 3" in done.stderr
