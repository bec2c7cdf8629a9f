"""The split run in three processes: three ranks train exactly like one; failures end cleanly.

helpers.ranks.split_ranks (what each rank runs), helpers.ranks.split_run (the run),
helpers.ranks.failures (naming the rank at fault) and helpers.ranks.split_display (figures,
tables, code).

The multi-process tests start real processes on 127.0.0.1. The first run also starts the
forkserver (it imports torch once), so the module shares one successful run.
"""

import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from helpers import source as source_module
from helpers.ranks import __main__ as command_line
from helpers.ranks import failures, launch, split_display, split_ranks
from helpers.ranks import split_run as d
from helpers.split import POST_INPUT, build_models

ROOT = Path(__file__).resolve().parents[2]
STEPS = 4


def rank_processes() -> list[psutil.Process]:
    """Running rank processes under this one: spawned, or forked by the forkserver.

    The forkserver itself (a direct child, whose forks share its command line) and the resource
    tracker live as long as this process and exit with it (tested below); they are not ranks.
    """
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            command = " ".join(p.cmdline())
            spawned = "multiprocessing.spawn" in command
            forked = "multiprocessing.forkserver" in command and p.ppid() != os.getpid()
            if (spawned or forked) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def assert_nothing_left(pids: list[int]) -> None:
    assert launch.still_running(pids) == []
    assert rank_processes() == []


def with_marker(marker: str) -> list[psutil.Process]:
    """Running processes whose environment holds `marker` (children inherit it)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SPLIT_TEST_MARKER") == marker and p.status() != "zombie":
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.fixture(scope="module")
def run() -> d.DistributedRun:
    return d.run_distributed(steps=STEPS, deadline=240)


@pytest.fixture(scope="module")
def reference():
    return d.reference_run(STEPS)


# Pure parts -------------------------------------------------------------------------------------


def test_message_shapes_are_what_the_models_produce():
    models = build_models(42)
    tokens = torch.tensor(POST_INPUT)
    f1 = models.model1(tokens)
    shapes = {"f1": tuple(f1.shape), "f2": tuple(models.model2(f1).shape)}
    assert split_ranks.message_shapes() == shapes == split_ranks.SHAPES
    assert split_ranks.message_shapes(tokens_shape=(32, 5))["f1"] == (32, 5, 6)


def test_the_taught_functions_have_no_fault_injection():
    """Failing on purpose is the launcher's business: what notebook 07 prints never sees it."""
    taught = [
        split_ranks.client_step,
        split_ranks.middle_step,
        split_ranks.label_step,
        split_ranks.run_rank,
        split_ranks.Wire.__init__,
        split_ranks.Wire.start_step,
        split_ranks.Wire.send,
        split_ranks.Wire.recv,
    ]
    for fn in taught:
        names = list(inspect.signature(fn).parameters)
        assert not [n for n in names if re.search("fail|fault|inject|hang", n)], (fn, names)
    parameters = {fn.__name__: list(inspect.signature(fn).parameters) for fn in taught[:3]}
    assert parameters == {
        "client_step": ["model", "tokens", "wire"],
        "middle_step": ["model", "wire"],
        "label_step": ["model", "label", "wire"],
    }
    source = inspect.getsource(split_ranks).lower()
    assert not re.search(r"fail_|\bfault|inject", source)


def test_a_fault_plan_hits_only_its_rank_at_its_step():
    plan = d.FaultPlan(rank=1, step=2, mode="raise")
    other = d.LaunchedWire(0, 1.0, plan)
    other.start_step(2)  # rank 0 carries on
    wire = d.LaunchedWire(1, 1.0, plan)
    wire.start_step(1)
    assert launch.current_status()["step"] == 1  # what the launcher reads
    with pytest.raises(RuntimeError, match="injected failure on rank 1 at step 2"):
        wire.start_step(2)
    assert launch.current_status()["step"] == 2  # said first


def test_a_message_name_says_its_direction():
    wire = split_ranks.Wire(0, timeout=1)
    with pytest.raises(ValueError, match=r"starts with 'activation' .* or 'gradient'"):
        wire.send(torch.ones(1), 1, "weights of model 1")
    assert wire.sent == [] and wire.status["phase"] == "setup"


def test_show_source_shows_the_real_functions_side_by_side():
    steps = (split_ranks.client_step, split_ranks.middle_step, split_ranks.label_step)
    view = split_display.show_source(*steps)
    assert [title for title, _ in view.columns] == [
        f"{fn.__name__} · helpers/ranks/split_ranks.py" for fn in steps
    ]
    for fn in steps:
        assert inspect.getsource(fn).rstrip() in repr(view)
    page = view._repr_html_()
    assert page.count("<pre") == 3 and "flex-wrap: wrap" in page
    # the lines that send or receive are tinted like the diagram's arrows: 3 forward, 3 backward
    assert page.count(f"inset 3px 0 {split_display.FORWARD}") == 4
    assert page.count(f"inset 3px 0 {split_display.BACKWARD}") == 4
    methods = split_display.show_source(split_ranks.Wire.send, split_ranks.Wire.recv)
    assert repr(methods).startswith("# Wire.send · helpers/ranks/split_ranks.py\ndef send(self")


def test_source_is_coloured_token_by_token_and_line_by_line():
    source = 'def f(x):\n    """Two\n    lines."""\n    return len(x) + 1  # one <more>\n'
    lines = source_module._highlighted(source)
    assert len(lines) == 4
    assert lines[0].startswith('<span style="color: #008000; font-weight: bold">def</span> ')
    assert '<span style="color: #0000ff">f</span>(x):' in lines[0]
    assert lines[1] == '    <span style="color: #ba2121">&quot;&quot;&quot;Two</span>'
    assert lines[2] == '<span style="color: #ba2121">    lines.&quot;&quot;&quot;</span>'
    assert '<span style="color: #008000">len</span>(x) + <span style="color: #666666">1' in lines[3]
    assert lines[3].endswith("italic\"># one &lt;more&gt;</span>")
    assert source_module._highlighted("not (python") == ["not (python"]  # plain, escaped


def test_show_source_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="at least one function"):
        split_display.show_source()
    with pytest.raises(TypeError, match="argument 2 is a str, not a function"):
        split_display.show_source(split_ranks.client_step, "middle_step")


def test_wire_record_round_trip_and_direction():
    r = split_ranks.WireRecord(2, "backward", 2, 1, "gradient ff2.grad", (1, 5, 6), "float32", 120)
    assert r.direction == "rank 2 → rank 1"
    assert split_ranks.WireRecord.from_dict(r.as_dict()) == r


def test_wire_table_columns_and_note():
    records = [
        split_ranks.WireRecord(s, "forward", 0, 1, "activation f1", (1, 5, 6), "float32", 120)
        for s in (1, 2, 3)
    ]
    table = split_display.wire_table(records, steps=[2])
    assert table.columns == ["step", "phase", "direction", "what", "shape", "bytes"]
    assert table.column("step") == [2] and table.column("shape") == ["[1, 5, 6]"]
    assert table.note == "3 messages, 360 payload bytes in all; shown: step 2"


def test_bad_arguments_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="fail_rank must be one of"):
        d.run_distributed(fail_rank=3)
    with pytest.raises(ValueError, match="fail_mode must be one of"):
        d.run_distributed(fail_rank=1, fail_mode="explode")
    with pytest.raises(ValueError, match="start_method must be"):
        d.run_distributed(start_method="fork")


def test_failure_message_names_the_silent_rank_of_a_chain():
    def report(rank, status, doing, peer, **extra):
        return {
            "rank": rank,
            "step": 3,
            "phase": "forward",
            "status": status,
            "doing": doing,
            "peer": peer,
            "exitcode": 1,
            **extra,
        }

    timeout = {"type": "PeerError", "timed_out": True, "time": 1.0, "message": "timed out"}
    reports = {
        0: report(0, "error", "waiting for gradient ff1.grad from rank 1", 1, **timeout),
        1: report(1, "stopped", "sending activation f2 to rank 2", 2),
        2: report(2, "stopped", "computing", None),
    }
    message, culprit = failures.failure_message(reports, split_ranks.ROLES, timeout=1, deadline=60)
    assert culprit == 2
    assert message.startswith("rank 2 (label holder) stopped answering at step 3 (forward)")


def test_figures_render_with_a_stable_description():
    records = [
        split_ranks.WireRecord(1, "forward", 0, 1, "activation f1", (1, 5, 6), "float32", 120),
        split_ranks.WireRecord(1, "backward", 1, 0, "gradient ff1.grad", (1, 5, 6), "float32", 120),
    ]
    seq = split_display.sequence_figure(records, step=1)
    assert repr(seq) == "[figure: sequence diagram of step 1: 2 messages]"
    assert seq.png().startswith(b"\x89PNG")
    curve = split_display.loss_figure([1.0, 0.5], [1.0, 0.5])
    assert repr(curve) == "[figure: loss curves, 2 steps: one process vs three processes]"
    assert curve.png().startswith(b"\x89PNG")


# Real processes ---------------------------------------------------------------------------------


def test_three_processes_train_exactly_like_one(run, reference):
    losses, models = reference
    assert len(run.losses) == STEPS
    torch.testing.assert_close(run.losses, losses)
    torch.testing.assert_close(run.losses[0], 1.6084858179092407)  # the post's number
    final = run.models().named_parameters()
    assert final.keys() == models.named_parameters().keys()
    for name, p in models.named_parameters().items():
        torch.testing.assert_close(final[name], p)
    assert_nothing_left(run.pids)


def test_wire_log_holds_four_messages_a_step_and_nothing_else(run):
    assert len(run.wire) == 4 * STEPS
    step1 = [(r.phase, r.direction, r.what) for r in run.wire if r.step == 1]
    assert step1 == [
        ("forward", "rank 0 → rank 1", "activation f1"),
        ("forward", "rank 1 → rank 2", "activation f2"),
        ("backward", "rank 2 → rank 1", "gradient ff2.grad"),
        ("backward", "rank 1 → rank 0", "gradient ff1.grad"),
    ]
    assert {(r.shape, r.dtype, r.nbytes) for r in run.wire} == {((1, 5, 6), "float32", 120)}
    assert [r.step for r in run.wire] == sorted(r.step for r in run.wire)


def test_each_rank_holds_only_its_own_model(run):
    models = build_models(42).as_list()
    for rank, state in run.state_dicts.items():
        assert state.keys() == models[rank].state_dict().keys()


def test_a_failing_rank_ends_the_run_with_its_rank_and_message(run):
    start = time.monotonic()
    with pytest.raises(failures.DistributedRunError) as caught:
        d.run_distributed(steps=3, fail_rank=1, fail_at_step=2, deadline=60)
    assert time.monotonic() - start < 30
    err = caught.value
    assert str(err).splitlines() == [
        "rank 1 (middle) failed at step 2 (forward): RuntimeError: "
        "injected failure on rank 1 at step 2",
        "All 3 processes have ended; none is left running.",
    ]
    assert err.rank == 1 and err.reports[1]["status"] == "error"
    assert "injected failure" in err.reports[1]["traceback"]
    assert_nothing_left(err.pids)


def test_a_rank_that_dies_silently_is_named_by_its_exit_code(run):
    with pytest.raises(
        failures.DistributedRunError, match=r"rank 0 \(client\) exited with code 3"
    ) as caught:
        d.run_distributed(steps=3, fail_rank=0, fail_at_step=1, fail_mode="exit", deadline=60)
    assert caught.value.rank == 0
    assert_nothing_left(caught.value.pids)


def test_a_hanging_rank_is_found_through_its_neighbours_timeouts(run):
    start = time.monotonic()
    with pytest.raises(
        failures.DistributedRunError, match=r"rank 2 \(label holder\) stopped answering"
    ) as caught:
        d.run_distributed(steps=5, fail_rank=2, fail_at_step=3, fail_mode="hang", timeout=1.5)
    assert time.monotonic() - start < 30
    assert caught.value.reports[2]["status"] == "stopped"  # the hanging rank was stopped ...
    assert_nothing_left(caught.value.pids)  # ... and is gone, with the others


# A rank's failure is reported with the time it happened (time.monotonic(), the same clock in
# every process on Linux). Once one rank has failed, the run cannot finish: the launcher stops the
# others at once, rather than waiting for the deadline (here 25 s) or their timeouts.
FAST_DEADLINE = 25
SOON_AFTER = 8  # seconds from the first failure to the launcher's return: generous (a busy machine)


@pytest.mark.parametrize(
    ("fail_mode", "fail_rank", "timeout"),
    [("raise", 1, FAST_DEADLINE), ("hang", 2, 1.5)],
    ids=["rank 1 raises", "rank 2 hangs, rank 1 times out, rank 2 would hang till the deadline"],
)
def test_the_run_ends_soon_after_the_first_failure(run, fail_mode, fail_rank, timeout):
    with pytest.raises(failures.DistributedRunError) as caught:
        d.run_distributed(
            steps=3,
            fail_rank=fail_rank,
            fail_at_step=2,
            fail_mode=fail_mode,
            timeout=timeout,
            deadline=FAST_DEADLINE,
        )
    returned = time.monotonic()
    err = caught.value
    failed = [r["time"] for r in err.reports.values() if r.get("time") is not None]
    assert failed, err.reports
    assert returned - min(failed) < SOON_AFTER, (
        f"the launcher returned {returned - min(failed):.1f} s after the first failure: "
        f"it should stop the other ranks at once\n{err}"
    )
    assert "did not finish within" not in str(err) and err.rank == fail_rank
    assert_nothing_left(err.pids)


def test_the_deadline_stops_a_run_nobody_times_out(run):
    start = time.monotonic()
    with pytest.raises(
        failures.DistributedRunError, match="did not finish within 4 s"
    ) as caught:
        d.run_distributed(
            steps=5, fail_rank=1, fail_at_step=1, fail_mode="hang", timeout=600, deadline=4
        )
    assert time.monotonic() - start < 4 + 10
    err = caught.value
    assert {r["status"] for r in err.reports.values()} == {"stopped"}
    assert err.rank == 1 and "rank 1 (middle): was computing" in str(err)
    assert_nothing_left(err.pids)


def test_without_a_forkserver_ranks_are_spawned_and_train_the_same(reference, monkeypatch):
    """Windows has no forkserver (multiprocessing offers only spawn there): the default start
    method falls back to spawn, start_forkserver says False, and the run is the same."""
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert launch.rank_context(None).get_start_method() == "spawn"
    assert launch.start_forkserver() is False
    losses, _ = reference
    spawned = d.run_distributed(steps=1, deadline=240)  # no start_method: the platform's choice
    torch.testing.assert_close(spawned.losses, losses[:1])
    assert_nothing_left(spawned.pids)
    assert launch.rank_context("spawn").get_start_method() == "spawn"


def test_with_a_forkserver_it_is_the_default():
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform has no forkserver")
    assert launch.rank_context(None).get_start_method() == "forkserver"


def _torchrun(args: list[str], out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    torchrun = Path(sys.executable).with_name("torchrun")
    return subprocess.run(
        [str(torchrun), *args, "-m", "helpers.ranks", "split", "--steps", "3", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_torchrun_command_runs_the_same_code(tmp_path, reference):
    # as helpers/ranks/__main__.py says to run it: --standalone, so torchrun's store binds a port
    # the system gives it (no port picked beforehand that another program could take meanwhile)
    done = _torchrun(["--standalone", "--nproc-per-node", "3"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[rank 2] losses: 1.6085, 1.5708, 1.5349" in done.stdout
    losses, _ = reference
    final = {}
    for rank in range(3):
        result = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        final.update({f"model{rank + 1}.{k}": v for k, v in result.state_dict.items()})
        if rank == 2:
            torch.testing.assert_close(result.losses, losses[:3])
    again = d.reference_run(3)[1].named_parameters()
    for name, p in again.items():
        torch.testing.assert_close(final[name], p)


def test_plain_command_checks_itself_and_leaves_no_process():
    marker = f"plain-{os.getpid()}-{time.monotonic_ns()}"
    done = subprocess.run(
        [sys.executable, "-m", "helpers.ranks", "split", "--steps", "2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPLIT_TEST_MARKER": marker},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "step 2: loss 1.5708 (three processes), 1.5708 (one process)" in done.stdout
    assert done.stdout.rstrip().endswith("losses and final parameters equal the single-process run")
    end = time.monotonic() + 10  # the forkserver and resource tracker exit with their parent
    while with_marker(marker) and time.monotonic() < end:
        time.sleep(0.2)
    assert with_marker(marker) == []


def test_wrong_world_size_is_explained(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert command_line.main(["split", "--steps", "1"]) == 2
    assert "needs exactly 3 processes, got WORLD_SIZE=2" in capsys.readouterr().err


def test_stop_forkserver_ends_server_and_tracker_and_the_next_run_starts_them_again(run):
    assert launch.start_forkserver()
    ended = launch.stop_forkserver()
    assert sorted(ended) == ["forkserver", "resource tracker"]
    assert launch.still_running(list(ended.values())) == []
    assert launch.stop_forkserver() == {}  # nothing left to stop
    again = d.run_distributed(steps=2, deadline=240)
    assert again.losses == run.losses[:2]
    assert_nothing_left(again.pids)


def test_the_wire_table_names_each_message_in_the_learners_language():
    from helpers.language import set_language

    records = [
        split_ranks.WireRecord(1, phase, 0, 1, what, (1, 5, 6), "float32", 120)
        for phase, what in (("forward", "activation f1"), ("backward", "gradient ff2.grad"))
    ]
    what = [r.what for r in records]
    assert split_display.wire_table(records).column("what") == what
    set_language("zh")
    try:
        assert split_display.wire_table(records).column("what") == ["激活值 f1", "梯度 ff2.grad"]
    finally:
        set_language("en")
