"""`make bench`'s bookkeeping: the probe, the floors and the ratios, with a fake clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.runners import bench


def test_floor_source_imports_torch_helpers_and_the_given_libraries():
    assert bench.floor_source() == "import torch\nimport helpers"
    assert bench.floor_source(["torch._dynamo", "ipywidgets"]).splitlines() == [
        "import torch",
        "import helpers",
        "import torch._dynamo",
        "import ipywidgets",
    ]


def test_the_probe_names_exactly_the_one_time_libraries_a_process_has_loaded():
    code = "import ipywidgets\n" + bench.PROBE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    outputs = [{"output_type": "stream", "name": "stdout", "text": out.stdout}]
    assert bench.probed_libraries(outputs) == ["ipywidgets"]


def test_a_probe_without_its_line_is_an_error_not_an_empty_list():
    with pytest.raises(ValueError, match="bench-probe"):
        bench.probed_libraries([{"output_type": "stream", "text": "something else\n"}])


class FakeRunner:
    """Floor 2 s; each one-time library adds 1 s; notebooks take what the table says."""

    def __init__(self, notebooks: dict[str, tuple[float, list[str]]]) -> None:
        self.notebooks = notebooks
        self.calls: list[str] = []

    def __call__(self, path, libraries):
        if path is None:
            self.calls.append("library floor" if libraries else "floor")
            return 2.0 + len(libraries), list(libraries)
        self.calls.append(path.name)
        return self.notebooks[path.name]


def test_notebooks_are_timed_against_their_floor_and_their_library_floor():
    runner = FakeRunner(
        {"01_a.ipynb": (3.0, []), "02_b.ipynb": (6.5, ["torch._dynamo", "matplotlib.figure"])}
    )
    paths = [Path("01_a.ipynb"), Path("02_b.ipynb")]
    rows, (steady, suite, own) = bench.bench_notebooks(2, paths, run=runner)
    assert steady["met"]  # the fake floor is always 2 s

    assert runner.calls[:3] == ["floor", "01_a.ipynb", "floor"]  # no libraries: plain floor
    assert runner.calls[6:9] == ["floor", "02_b.ipynb", "library floor"]
    assert rows[0]["value"].startswith("1.00 s") and rows[0]["met"]
    assert rows[1]["value"].startswith("4.50 s") and not rows[1]["met"]
    assert "(torch._dynamo, matplotlib): 2.00 s" in rows[1]["value"]
    assert suite["value"].startswith("2.38×") and not suite["met"]  # 9.5 s vs 4 s
    assert own["value"].startswith("1.58×") and own["met"] is None  # 9.5 s vs 6 s


def test_07_has_its_own_target():
    runner = FakeRunner({"07_split_across_processes.ipynb": (9.0, [])})
    rows, _ = bench.bench_notebooks(1, [Path("07_split_across_processes.ipynb")], run=runner)
    assert rows[0]["target"] == "≤ 10 s" and rows[0]["met"]


def test_informational_rows_render_as_not_applicable():
    _, suite = bench.bench_notebooks(
        1, [Path("01_a.ipynb")], run=FakeRunner({"01_a.ipynb": (2.5, [])})
    )
    text = bench.render(suite, repeat=1)
    assert text.count("| NO |") == 0 and "| yes |" in text and "| n/a |" in text


def test_only_must_match_a_notebook(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--only", "no-such-notebook"])
    assert "matches no notebook" in capsys.readouterr().err


def test_a_notebook_is_compared_with_the_floor_of_its_own_round():
    # a slow round (the machine busy) slows both kernels of that round; pairing cancels it
    runs, floors = [5.0, 3.0, 10.0], [2.0, 1.0, 9.0]
    assert bench.paired_median(runs, floors) == 2.0  # rounds differ by 3, 2 and 1 s
    assert bench.statistics.median(runs) - bench.statistics.median(floors) == 3.0


def test_a_disturbed_machine_is_flagged():
    assert bench.steadiness_row([2.0, 2.1, 1.95, 2.05])["met"]
    row = bench.steadiness_row([2.0, 2.1, 2.0, 2.9])  # one floor kernel 45% slower
    assert not row["met"] and row["value"] == "median 2.05 s, from 2.00 to 2.90 s"


def test_the_doctor_is_timed_against_the_same_step_without_it(monkeypatch):
    clock = iter(range(1000))
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock) * 0.001)
    rows = bench.bench_doctor(repeat=1, steps=1)
    assert [r["measure"] for r in rows] == [
        "doctor around one training step, 08's three layers",
        "doctor around one training step, an MLP 784-256-256-10, batch 64",
    ]
    # each timed run takes one tick of the fake clock: the doctor adds nothing, 1.0×
    assert rows[0]["value"] == "+0.00 ms, 1.0× (1.00 ms vs 1.00 ms)"
    assert rows[0]["target"] == "≤ +10 ms" and rows[0]["met"] is True


def test_the_explainer_is_timed_against_the_same_step_bare_and_under_anomaly_mode(monkeypatch):
    ticks = {"bare": 1, "explainer": 2, "anomaly": 5}  # a step's duration, in ms, by way
    now = [0.0]
    way = []

    def perf_counter():
        return now[0]

    def step(model, optimizer, x, y):
        import torch

        watched = torch.overrides._get_current_function_mode_stack()
        name = "anomaly" if torch.is_anomaly_enabled() else "explainer" if watched else "bare"
        way.append(name)
        now[0] += ticks[name] / 1000

    monkeypatch.setattr(bench.time, "perf_counter", perf_counter)
    monkeypatch.setattr(bench, "_training_step", step)
    row = bench.bench_explainer(repeat=1, steps=1)
    assert set(way) == {"bare", "explainer", "anomaly"}
    assert row["value"] == "2.00× bare; anomaly mode 5.00× (bare 1.00 ms)"
    assert row["target"] == "≤ 1.3×" and row["met"] is False


def test_the_tiny_model_is_timed_bare_under_the_watch_and_under_an_empty_mode(monkeypatch):
    """The floor is an empty torch function mode, timed in the same rounds; the target is the
    floor's own cost above bare, twice."""
    from helpers.explain.watch import Watch

    now = [0.0]
    way = []

    def step(model, optimizer, x, y):
        import torch

        modes = torch.overrides._get_current_function_mode_stack()
        name = "bare" if not modes else "explainer" if isinstance(modes[-1], Watch) else "floor"
        way.append(name)
        now[0] += ticks[name] / 1000

    monkeypatch.setattr(bench.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(bench, "_small_step", step)
    ticks = {"bare": 1, "explainer": 3, "floor": 2}
    row = bench.bench_explainer_small(repeat=1, steps=1)
    assert set(way) == {"bare", "explainer", "floor"}
    floor = "an empty torch function mode (the floor) 2.00×"
    assert row["value"] == f"3.00× bare; {floor} (bare 1.000 ms)"
    assert row["target"] == "≤ 1 + 2 × (floor − 1) = 3.00×" and row["met"] is True
    ticks["explainer"] = 3.5
    assert bench.bench_explainer_small(repeat=1, steps=1)["met"] is False


def test_rows_times_only_the_rows_named_and_writes_no_file(monkeypatch, capsys):
    ran = []
    for name in bench.MICRO_ROWS:
        row = {"measure": name, "value": "1", "target": "", "met": None}
        monkeypatch.setitem(bench.MICRO_ROWS, name, lambda repeat, row=row: ran.append(row) or row)
    monkeypatch.setattr(bench, "bench_notebooks", lambda *_: pytest.fail("a notebook was run"))
    monkeypatch.setattr(bench.Path, "write_text", lambda *_: pytest.fail("a file was written"))
    assert bench.main(["--rows", "explainer"]) == 0
    assert [r["measure"] for r in ran] == ["explainer", "explainer-small"]
    assert "| explainer-small | 1 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--rows", "no-such-row"])
    assert "matches none of" in capsys.readouterr().err


def test_make_test_times_check_test_and_each_notebook_in_one_clone(monkeypatch):
    ran = []

    def fake_run(command, cwd=None, env=None, **kwargs):
        ran.append(command)
        failed = command[:3] == ["make", "test", "NB=02"]  # one notebook's check fails
        out = "step  result\nall   ok" if command == ["make", "test"] else ""
        return subprocess.CompletedProcess(command, 1 if failed else 0, stdout=out, stderr="")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    monkeypatch.setattr(bench, "NOTEBOOKS", [Path("01_a.ipynb"), Path("02_b.ipynb")])
    rows = bench.bench_make_test()
    makes = [c for c in ran if c[0] == "make"]
    assert makes == [["make", "install"], ["make", "check"], ["make", "test"],
                     ["make", "test", "NB=01"], ["make", "test", "NB=02"]]  # fmt: skip
    measures = [r["measure"].split(":")[0] for r in rows]
    assert measures[1:3] == [
        "make check in the same clone",
        "make test in a fresh clone, install excluded (CI=true)",
    ]
    assert rows[1]["value"].endswith("(passed)") and rows[1]["met"]
    assert [r["value"].endswith("(FAILED)") for r in rows[3:]] == [False, True]
    assert [r["met"] for r in rows[3:]] == [True, False]


def test_the_header_names_the_processor(tmp_path):
    import torch

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B12\n")
    assert bench.processor_name(info).startswith("AMD EPYC 7B12, ")
    info.write_text("processor\t: 0\n")  # no model given: the architecture alone
    assert bench.processor_name(info) == (bench.platform.processor() or bench.platform.machine())
    assert bench.processor_name(tmp_path / "absent") == bench.processor_name(info)
    header = bench.render([], repeat=1).splitlines()[2]
    capability = torch.backends.cpu.get_cpu_capability()
    assert f"({bench.processor_name()}; torch's CPU kernels: {capability})" in header


def test_every_widget_control_can_be_changed_as_the_bench_changes_it():
    controls = bench._widget_controls()
    assert {name.split(":")[0] for name, _, _ in controls} >= {"optimizer lab", "graph explorer"}
    for _, _, change in controls:
        change(0)
        change(1)
