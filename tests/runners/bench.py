"""`make bench`: the course measured against its physical floor, in one run, as ratios.

    python -m tests.runners.bench [--repeat N] [--only TEXT] [--out BENCHMARKS.md]
    python -m tests.runners.bench --rows explainer    # some rows of 3., 4. and 6. only, no file

1. The whole notebook suite vs its floor: as many fresh kernels that only `import torch, helpers`.
   Notebook runs and floor runs alternate, so both see the same machine load.
2. Each notebook's Run All time minus the floor: the median, over rounds, of the difference
   between the notebook's run and the floor kernel run just before it.
3. `show_graph` (build + SVG + text form) vs raw torchviz (build + SVG) on a ~1,200-edge graph,
   a training step inside `with doctor(model)` vs the same step without it, a training step
   under the explainer's watch and under anomaly mode vs the same step bare, and a tiny model's
   step (mostly Python) under the watch and under an empty torch function mode (the floor of any
   watcher that sees every call) vs the same step bare.
4. `import torch, helpers` over `import torch`, in fresh interpreters.
5. Whether the machine kept one speed: the spread of all floor kernel runs. Seconds measured
   while something else used the machine are stretched; this row says when that happened.
6. Every widget's update: each control of the optimizer lab, the graph explorer, the backward
   stepper and a quiz changed 15 times, each change timed; the median and the slowest.
7. `make test` as a newcomer runs it: a fresh clone, `make install` timed apart, `make check`
   (the maintainers' fast loop), then the README's test command (`--skip-make-test` leaves it
   out); then, in the same clone, the one-notebook check of every notebook (`make test NB=07b`),
   each timed.

Where the time goes: some libraries cost a notebook a fixed amount the first time a kernel loads
them (import, and the matching teardown when the kernel exits), whatever the notebook does with
them. Torch loads some of its own parts lazily: the first `torch.optim` optimizer imports
`torch._dynamo` (torch's `@_disable_dynamo`), the first `backward(gradient)` imports
`torch.fx.experimental.symbolic_shapes` and sympy (to check the gradient's shape), the first
`torch.testing.assert_close` imports `torch.distributed.tensor`. The first figure imports
matplotlib, the first widget ipywidgets (`ONE_TIME_LIBRARIES`). A probe cell appended to each
notebook run reports which of these the notebook loaded; a third kernel per round, the *library
floor*, imports torch, helpers and exactly those. Its excess over the floor is reported next to
each notebook, and the suite is also compared with the library floors: what the course's own
code adds once those one-time costs are paid.

It prints a table and writes it to BENCHMARKS.md. Nothing in it is typed in by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from tooling.course import course_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = course_notebooks(ROOT / "notebooks")  # 00_ ... 06_, 06b_, 07_ ...
TARGET_SUITE_RATIO = 1.5
#: The explainer's watch over a bare training step (issue 52's goal).
TARGET_EXPLAINER_RATIO = 1.3
#: On a model so small that its step is mostly Python, any torch function mode costs a step a
#: share of its own: one more Python call for each of the ~85 torch calls of an Adam step. That
#: mode, empty, is the floor of a watch that sees every call (measured in the same run); the
#: watch, which must also make each call from the caller's line and write down what the
#: learner's code did, may cost at most as much again above the floor as the floor above bare.
TARGET_EXPLAINER_OVER_FLOOR = 2.0
TARGET_ABOVE_FLOOR = {
    "07_split_across_processes.ipynb": 10.0,
    "07b_pipeline_and_data_parallel.ipynb": 10.0,  # starts 3 + 3 + 3 + 2 + 3 processes
    # torch.compile's first call of each of its 9 functions traces and compiles (seconds, measured
    # in the notebook's first cell); 6 s is the most the course allows a notebook that compiles
    "09c_torch_compile_and_autograd.ipynb": 6.0,
}
TARGET_WIDGET_MS = 100  # a widget's slowest update after a change of one of its controls
WIDGET_CHANGES = 15  # changes of each control, timed one by one
TARGET_MAKE_CHECK_MIN = 2.0  # `make check`: the fast loop for changing the helpers
TARGET_MAKE_TEST_MIN = 10.0  # `make test` in a fresh clone, installs excluded
TARGET_NOTEBOOK_CHECK_MIN = 3.0  # `make test NB=07b`: one notebook proven
DEFAULT_ABOVE_FLOOR = 3.0
TARGET_GRAPH_RATIO = 1.1
#: The doctor checks the one step a learner looks at, not every step of a run: what it adds must not
#: be a wait one notices. 10 ms is well under the 0.1 s of Nielsen's "instantaneous" limit.
TARGET_DOCTOR_MS = 10.0
TARGET_IMPORT = 0.2
STEADY = 0.15  # floor kernels further than this from their median: the machine was disturbed
# Libraries with a large one-time cost in a kernel: module → the short name the table uses.
# torch loads the first three lazily: the first
# torch.optim optimizer (torch's @_disable_dynamo), the first backward(gradient) (its shape
# check) and the first torch.testing.assert_close (its DTensor check). The probe finds them
# whoever imported them first.
ONE_TIME_LIBRARIES = {
    "torch._dynamo": "torch._dynamo",
    "torch.fx.experimental.symbolic_shapes": "symbolic_shapes",
    "torch.distributed.tensor": "DTensor",
    "matplotlib.figure": "matplotlib",
    "ipywidgets": "ipywidgets",
}
PROBE_MARK = "bench-probe:"
PROBE = (
    "import sys\n"
    f"print({PROBE_MARK!r}, *[m for m in {list(ONE_TIME_LIBRARIES)!r} if m in sys.modules])"
)

# run(notebook or None for a floor kernel, libraries the floor kernel imports too)
#   -> (seconds, one-time libraries the kernel ended up with)
Runner = Callable[[Path | None, Sequence[str]], tuple[float, list[str]]]


def floor_source(libraries: Sequence[str] = ()) -> str:
    """The floor kernel's one cell: torch and the helpers, plus `libraries` (the library floor)."""
    return "\n".join(["import torch", "import helpers", *(f"import {m}" for m in libraries)])


def probed_libraries(outputs: list[dict]) -> list[str]:
    """The one-time libraries named by the probe cell's output."""
    for output in outputs:
        text = output.get("text", "")
        if output.get("output_type") == "stream" and text.startswith(PROBE_MARK):
            return text[len(PROBE_MARK) :].split()
    raise ValueError(f"no {PROBE_MARK!r} line in the probe cell's output: {outputs!r}")


def run_notebook(path: Path | None, libraries: Sequence[str] = ()) -> tuple[float, list[str]]:
    """Seconds to start a kernel and run `path` top to bottom, and the one-time libraries loaded.

    `path=None` runs a floor kernel instead (importing `libraries` too). A notebook gets the probe
    cell appended; it costs a message round trip (milliseconds).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    if path is None:
        nb = new_notebook(cells=[new_code_cell(floor_source(libraries))])
        where = ROOT / "notebooks"
    else:
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(new_code_cell(PROBE))
        where = path.parent
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(where)}}
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    return seconds, (list(libraries) if path is None else probed_libraries(nb.cells[-1].outputs))


def bench_notebooks(
    repeat: int, notebooks: Sequence[Path] = NOTEBOOKS, run: Runner = run_notebook
) -> tuple[list[dict], list[dict]]:
    """Per-notebook rows and suite rows. Each round runs floor, notebook, library floor."""
    rows = []
    totals = {"floor": 0.0, "notebooks": 0.0, "library floor": 0.0}
    all_floors: list[float] = []
    for path in notebooks:
        times: dict[str, list[float]] = {key: [] for key in totals}
        libraries: list[str] = []
        for _ in range(repeat):
            times["floor"].append(run(None, ())[0])
            seconds, libraries = run(path, ())
            times["notebooks"].append(seconds)
            times["library floor"].append(run(None, libraries)[0])
        all_floors += times["floor"]
        medians = {key: statistics.median(values) for key, values in times.items()}
        for key, value in medians.items():
            totals[key] += value
        # Differences within a round (kernels started seconds apart) cancel slow drifts in the
        # machine's load; their median is steadier than a difference of medians.
        above = paired_median(times["notebooks"], times["floor"])
        target = TARGET_ABOVE_FLOOR.get(path.name, DEFAULT_ABOVE_FLOOR)
        one_time = paired_median(times["library floor"], times["floor"])
        loaded = ", ".join(ONE_TIME_LIBRARIES[m] for m in libraries) or "none"
        rows.append(
            {
                "measure": f"{path.name}: Run All minus floor",
                "value": f"{above:.2f} s (run {medians['notebooks']:.2f} s, floor "
                f"{medians['floor']:.2f} s); one-time libraries ({loaded}): {one_time:.2f} s",
                "target": f"≤ {target:g} s",
                "met": above <= target,
            }
        )
        print(rows[-1]["measure"], rows[-1]["value"], flush=True)
    return rows, [steadiness_row(all_floors), *suite_rows(totals, len(notebooks))]


def paired_median(runs: Sequence[float], floors: Sequence[float]) -> float:
    """The median of run − floor over rounds (each run paired with its round's floor)."""
    return statistics.median(r - f for r, f in zip(runs, floors, strict=True))


def steadiness_row(floors: Sequence[float]) -> dict:
    """Whether the machine kept one speed: every floor kernel within 15% of their median.

    The same kernel, started again and again, should take the same time. When it does not,
    something else was using the machine, and the seconds above are stretched with it.
    """
    median = statistics.median(floors)
    low, high = min(floors), max(floors)
    return {
        "measure": f"steady machine: the {len(floors)} floor kernels",
        "value": f"median {median:.2f} s, from {low:.2f} to {high:.2f} s",
        "target": f"all within ±{STEADY:.0%} of the median",
        "met": (1 - STEADY) * median <= low and high <= (1 + STEADY) * median,
    }


def suite_rows(totals: dict[str, float], count: int) -> list[dict]:
    """The suite against its floor (the target), and against its library floors (for insight)."""
    ratio = totals["notebooks"] / totals["floor"]
    own = totals["notebooks"] / totals["library floor"]
    return [
        {
            "measure": f"whole suite ({count} notebooks) vs {count} floor kernels",
            "value": f"{ratio:.2f}× ({totals['notebooks']:.1f} s vs {totals['floor']:.1f} s)",
            "target": f"≤ {TARGET_SUITE_RATIO:g}×",
            "met": ratio <= TARGET_SUITE_RATIO,
        },
        {
            "measure": f"whole suite vs {count} library floors (floor + the one-time libraries "
            "each notebook loads)",
            "value": f"{own:.2f}× ({totals['notebooks']:.1f} s vs {totals['library floor']:.1f} s)",
            "target": "none: shows what the course's own code adds",
            "met": None,
        },
    ]


def big_graph_output():
    """A tanh MLP chain whose autograd graph has about 1,200 edges."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(2, 4)
    layers = [torch.nn.Linear(4, 4) for _ in range(172)]
    for layer in layers:
        x = torch.tanh(layer(x))
    return x.sum(), layers


def bench_graph(repeat: int) -> dict:
    """show_graph vs torchviz on the same big graph, alternating, median of `repeat`."""
    import torchviz

    from helpers.graph import autograd_graph, show_graph

    y, _layers = big_graph_output()  # keep the modules alive while measuring
    edges = len(autograd_graph(y).edges)
    ours, theirs = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torchviz.make_dot(y).pipe(format="svg")
        theirs.append(time.perf_counter() - start)
        start = time.perf_counter()
        show_graph(y)._repr_mimebundle_()
        ours.append(time.perf_counter() - start)
    ratio = statistics.median(ours) / statistics.median(theirs)
    return {
        "measure": f"show_graph vs torchviz, build + render, {edges}-edge graph",
        "value": f"{ratio:.2f}× ({statistics.median(ours):.2f} s vs "
        f"{statistics.median(theirs):.2f} s)",
        "target": f"≤ {TARGET_GRAPH_RATIO:g}×",
        "met": ratio <= TARGET_GRAPH_RATIO,
    }


def _doctor_models():
    """08's three-layer model and step, and an MNIST-sized MLP (784 -> 256 -> 256 -> 10, a batch
    of 64): the step's cost without the doctor is mostly arithmetic in the second, bookkeeping in
    the first."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    tiny = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 1))
    mlp = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    return [
        ("08's three layers", tiny, torch.randn(2, 2), torch.randn(2, 1), nn.MSELoss()),
        (
            "an MLP 784-256-256-10, batch 64",
            mlp,
            torch.randn(64, 784),
            torch.randint(0, 10, (64,)),
            nn.CrossEntropyLoss(),
        ),
    ]


def _steps_time(model, x, target, loss_fn, steps: int, watched: bool) -> float:
    """Seconds per SGD step of `model`, over `steps` steps, inside `doctor(model)` or not."""
    import torch

    from helpers.doctor import doctor

    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for _ in range(steps):
        with doctor(model) if watched else contextlib.nullcontext():
            optimizer.zero_grad()
            loss_fn(model(x), target).backward()
            optimizer.step()
    return (time.perf_counter() - start) / steps


def bench_doctor(repeat: int, steps: int = 50) -> list[dict]:
    """One SGD step with and without `with doctor(model)` around it, alternating; the median of
    `repeat` rounds of `steps` steps each."""
    rows = []
    for label, *case in _doctor_models():
        plain, with_doctor = [], []
        for _ in range(max(5, repeat)):
            plain.append(_steps_time(*case, steps, watched=False))
            with_doctor.append(_steps_time(*case, steps, watched=True))
        ratio = statistics.median(with_doctor) / statistics.median(plain)
        added_ms = (statistics.median(with_doctor) - statistics.median(plain)) * 1e3
        rows.append(
            {
                "measure": f"doctor around one training step, {label}",
                "value": f"{round(added_ms, 2) + 0:+.2f} ms, {ratio:.1f}× "
                f"({statistics.median(with_doctor) * 1e3:.2f} ms vs "
                f"{statistics.median(plain) * 1e3:.2f} ms)",
                "target": f"≤ +{TARGET_DOCTOR_MS:g} ms",
                "met": added_ms <= TARGET_DOCTOR_MS,
            }
        )
    return rows


def _training_step(model, optimizer, x, y) -> None:
    import torch

    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def _time_ways(
    ways: dict[str, Callable[[], object]], step: Callable, case: tuple, steps: int, rounds: int,
    warmups: int,
) -> dict[str, list[float]]:
    """Each way's seconds per round: in each round the ways (context managers around a step)
    take turns, each timed over `steps` steps of `step(*case)`, its median kept."""
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(warmups):
        for way in ways.values():
            with way():
                step(*case)
    for _ in range(rounds):
        for name, way in ways.items():
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                with way():
                    step(*case)
                times.append(time.perf_counter() - start)
            seconds[name].append(statistics.median(times))
    return seconds


def bench_explainer(repeat: int, steps: int = 40) -> dict:
    """One training step bare, under the explainer's watch (`%load_ext helpers` runs every cell
    so) and under `torch.autograd.detect_anomaly()`: an MLP 784-256-10 on a batch of 64, SGD with
    momentum, one thread, as reports of anomaly mode's cost measure it. The three ways alternate
    within each round; a round's time is the median of its steps, and the ratio the median over
    rounds of the ratios within a round."""
    import torch
    from torch import nn

    from helpers.explain.watch import Watch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    watch = Watch()
    ways = {
        "bare": contextlib.nullcontext,
        "explainer": lambda: watch,
        "anomaly": torch.autograd.detect_anomaly,
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # anomaly mode warns that it is slow on every entry
            seconds = _time_ways(
                ways, _training_step, (model, optimizer, x, y), steps, max(15, 3 * repeat), 5
            )
    finally:
        torch.set_num_threads(threads)
    rounds = list(zip(*(seconds[n] for n in ways), strict=True))
    explainer = statistics.median(e / b for b, e, _ in rounds)
    anomaly = statistics.median(a / b for b, _, a in rounds)
    return {
        "measure": "explainer's watch around one training step, an MLP 784-256-10, batch 64",
        "value": f"{explainer:.2f}× bare; anomaly mode {anomaly:.2f}× "
        f"(bare {statistics.median(seconds['bare']) * 1e3:.2f} ms)",
        "target": f"≤ {TARGET_EXPLAINER_RATIO}×",
        "met": explainer <= TARGET_EXPLAINER_RATIO,
    }


def _small_model():
    """nn.Sequential(Linear(4, 8), ReLU, Linear(8, 1)), Adam, a batch of 16: a step of about a
    tenth of a millisecond, made of about 85 torch calls, most of them inside Adam's step."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    return model, optimizer, torch.randn(16, 4), torch.randn(16, 1)


def _small_step(model, optimizer, x, y) -> None:
    import torch

    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()


def bench_explainer_small(repeat: int, steps: int = 100) -> dict:
    """One training step of a tiny model (`_small_model`) bare, under the explainer's watch and
    under an empty torch function mode (the floor: what seeing every call costs before the
    watch does anything), one thread. The three ways alternate within each round, as in
    `bench_explainer`; a round's time is the median of its steps, and each ratio the median
    over rounds of the ratios within a round."""
    import torch
    from torch.overrides import TorchFunctionMode

    from helpers.explain.watch import Watch

    class Floor(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    case = _small_model()
    watch, floor = Watch(), Floor()
    ways = {"bare": contextlib.nullcontext, "explainer": lambda: watch, "floor": lambda: floor}
    try:  # 20 warm-up rounds: Adam's state, the watch's caches
        seconds = _time_ways(ways, _small_step, case, steps, max(15, 3 * repeat), 20)
    finally:
        torch.set_num_threads(threads)
    rounds = list(zip(*(seconds[n] for n in ways), strict=True))
    explainer = statistics.median(e / b for b, e, _ in rounds)
    floor_ratio = statistics.median(f / b for b, _, f in rounds)
    target = 1 + TARGET_EXPLAINER_OVER_FLOOR * (floor_ratio - 1)
    return {
        "measure": "explainer's watch around one training step, a tiny MLP 4-8-1, batch 16, Adam",
        "value": f"{explainer:.2f}× bare; an empty torch function mode (the floor) "
        f"{floor_ratio:.2f}× (bare {statistics.median(seconds['bare']) * 1e3:.3f} ms)",
        "target": f"≤ 1 + {TARGET_EXPLAINER_OVER_FLOOR:g} × (floor − 1) = {target:.2f}×",
        "met": explainer <= target,
    }


def _python_time(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - start


def bench_import(repeat: int) -> dict:
    """Fresh interpreters: `import torch` vs `import torch, helpers` (+ first use of show_graph)."""
    plain, with_helpers = [], []
    for _ in range(max(5, repeat)):
        plain.append(_python_time("import torch"))
        with_helpers.append(_python_time("import torch, helpers; helpers.show_graph"))
    extra = statistics.median(with_helpers) - statistics.median(plain)
    return {
        "measure": "import helpers (and first use of show_graph) over import torch",
        "value": f"{extra:+.3f} s ({statistics.median(with_helpers):.2f} s vs "
        f"{statistics.median(plain):.2f} s)",
        "target": f"≤ {TARGET_IMPORT:g} s",
        "met": extra <= TARGET_IMPORT,
    }


def _widget_controls() -> list[tuple[str, object, Callable[[int], None]]]:
    """(name, widget, change(i)): every control of every explorer, each change a new value."""
    from helpers.interactive.widgets import backward_stepper, graph_explorer, optimizer_lab
    from helpers.quiz import quiz

    lab, explorer, stepper = optimizer_lab(), graph_explorer(), backward_stepper()
    questions = quiz("split")
    controls: list[tuple[str, object, Callable[[int], None]]] = []

    def choices(control) -> list:
        """A selection's values: a Dropdown's options may be (label, value) pairs."""
        return [o[1] if isinstance(o, tuple) else o for o in control.options]

    def cycle(control, values):
        def change(i: int) -> None:
            options = [v for v in list(values) if v != control.value]
            control.value = options[i % len(options)]

        return change

    c = lab.controls
    controls += [
        ("optimizer lab: optimizer", lab, cycle(c["optimizer"], choices(c["optimizer"]))),
        ("optimizer lab: lr", lab, cycle(c["lr"], [10.0**e for e in (-4, -3, -2, -1.5, -1, 0)])),
        ("optimizer lab: set_to_none", lab, cycle(c["set_to_none"], [True, False])),
        ("optimizer lab: arrangement", lab, cycle(c["arrangement"], choices(c["arrangement"]))),
    ]
    for name, box in explorer.controls.items():
        controls.append((f"graph explorer: {name}", explorer, cycle(box, [True, False])))
    frames = list(range(stepper.slider.min, stepper.slider.max + 1))
    controls += [
        ("backward stepper: slider", stepper, cycle(stepper.slider, frames)),
        ("backward stepper: retain_graph", stepper, cycle(stepper.retain, [True, False])),
        ("quiz: an answer", questions, lambda i: questions.answer(i % len(questions.items),
                                                                  ("yes", "no")[i % 2])),
    ]  # fmt: skip
    return controls


def bench_widgets(changes: int = WIDGET_CHANGES) -> list[dict]:
    """Each control changed `changes` times: median and slowest update, against the target."""
    rows = []
    for name, _widget, change in _widget_controls():
        times = []
        for i in range(changes):
            start = time.perf_counter()
            change(i)
            times.append((time.perf_counter() - start) * 1000)
        slowest = max(times)
        rows.append(
            {
                "measure": f"widget update, {name} ({changes} changes)",
                "value": f"median {statistics.median(times):.0f} ms, slowest {slowest:.0f} ms",
                "target": f"slowest ≤ {TARGET_WIDGET_MS} ms",
                "met": slowest <= TARGET_WIDGET_MS,
            }
        )
    return rows


def bench_make_test() -> list[dict]:
    """`make test` as a newcomer runs it: a fresh clone of HEAD, `make install` (timed apart),
    `make check` (the maintainers' fast loop), then `CI=true make test` (the README's test
    command), with this machine's package caches; then the one-notebook check of each notebook."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-clone-") as tmp:
        clone = Path(tmp) / "course"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
        start = time.monotonic()
        subprocess.run(["make", "install"], cwd=clone, env=env, check=True, timeout=3600,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        installed = time.monotonic() - start

        def timed_make(*args: str, timeout: int) -> tuple[subprocess.CompletedProcess, float]:
            start = time.monotonic()
            done = subprocess.run(
                ["make", *args], cwd=clone, env={**env, "CI": "true"},
                capture_output=True, text=True, timeout=timeout, check=False,
            )  # fmt: skip
            return done, time.monotonic() - start

        check, checked = timed_make("check", timeout=1800)
        done, tested = timed_make("test", timeout=5400)
        checks = []
        for notebook in NOTEBOOKS:  # the one-notebook check, notebook by notebook, in the clone
            name = notebook.stem.split("_")[0]
            one, seconds = timed_make("test", f"NB={name}", timeout=1800)
            checks.append((notebook.name, name, seconds, one.returncode == 0))
    table = done.stdout[done.stdout.rfind("step  ") :].strip() if "step  " in done.stdout else ""
    print(table)
    minutes = tested / 60
    one_notebook = [
        {
            "measure": f"make test NB={name} in the same clone: the one-notebook check of {file}",
            "value": f"{seconds / 60:.1f} min ({'passed' if ok else 'FAILED'})",
            "target": f"≤ {TARGET_NOTEBOOK_CHECK_MIN:g} min, passing",
            "met": ok and seconds / 60 <= TARGET_NOTEBOOK_CHECK_MIN,
        }
        for file, name, seconds, ok in checks
    ]
    return [
        {
            "measure": "make install in a fresh clone (warm package caches)",
            "value": f"{installed:.0f} s",
            "target": "none: measured apart from make test",
            "met": None,
        },
        {
            "measure": "make check in the same clone: lint and the unit tests",
            "value": f"{checked / 60:.1f} min ({'passed' if check.returncode == 0 else 'FAILED'})",
            "target": f"≤ {TARGET_MAKE_CHECK_MIN:g} min, passing",
            "met": check.returncode == 0 and checked / 60 <= TARGET_MAKE_CHECK_MIN,
        },
        {
            "measure": "make test in a fresh clone, install excluded (CI=true)",
            "value": f"{minutes:.1f} min ({'passed' if done.returncode == 0 else 'FAILED'})",
            "target": f"≤ {TARGET_MAKE_TEST_MIN:g} min, passing",
            "met": done.returncode == 0 and minutes <= TARGET_MAKE_TEST_MIN,
        },
        *one_notebook,
    ]


def processor_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The processor's model as the system names it ("AMD EPYC", "Intel(R) Xeon(R) ..."), with
    its architecture; the architecture alone where the model is not known. Timings from two runs
    compare only on the same processor."""
    machine = platform.processor() or platform.machine()
    try:
        lines = cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        return machine
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), "")
    return f"{model}, {machine}" if model else machine


def render(rows: list[dict], repeat: int) -> str:
    """The results as Markdown."""
    import torch

    cpu = processor_name()
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`tests/runners/bench.py`); do not edit by hand. Measured "
        f"{datetime.date.today().isoformat()} on {os.cpu_count()} CPU cores ({cpu}; torch's "
        f"CPU kernels: {torch.backends.cpu.get_cpu_capability()}), Python "
        f"{platform.python_version()}, torch {torch.__version__}, in {repeat} rounds per "
        "notebook. A round starts three fresh kernels one after another: the floor (`import "
        "torch, helpers`), the notebook (Run All), and the library floor (the floor plus the "
        "one-time libraries that notebook loaded). Suite totals add each kernel's median; a "
        "notebook's figures are medians of differences within a round.",
        "",
        "| measure | value | target | met |",
        "|---|---|---|---|",
    ]
    for r in rows:
        met = "n/a" if r["met"] is None else "yes" if r["met"] else "NO"
        lines.append(f"| {r['measure']} | {r['value']} | {r['target']} | {met} |")
    return "\n".join(lines) + "\n"


#: The rows that time one thing in this process (not notebooks, not `make test`), by name:
#: `--rows explainer` runs the explainer's two.
MICRO_ROWS: dict[str, Callable[[int], dict | list[dict]]] = {
    "import": bench_import,
    "graph": bench_graph,
    "doctor": bench_doctor,
    "explainer": bench_explainer,
    "explainer-small": bench_explainer_small,
    "widgets": lambda repeat: bench_widgets(),
}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write it to --out.

    A partial run (--only, --skip-notebooks) writes no file unless --out is given, so
    BENCHMARKS.md always holds a whole run.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", help="where to write the table (default: BENCHMARKS.md)")
    parser.add_argument("--skip-notebooks", action="store_true")
    parser.add_argument("--skip-make-test", action="store_true", help="no fresh-clone make test")
    parser.add_argument(
        "--only", default="", help="time only the notebooks whose file name contains this text"
    )
    parser.add_argument(
        "--rows",
        default="",
        help="time only the rows of this process whose name contains this text (explainer, "
        f"doctor, ...: {', '.join(MICRO_ROWS)}); no notebook, no make test, no file written",
    )
    args = parser.parse_args(argv)
    if args.rows:
        chosen = [bench for name, bench in MICRO_ROWS.items() if args.rows in name]
        if not chosen:
            parser.error(f"--rows {args.rows!r} matches none of {', '.join(MICRO_ROWS)}")
        rows = []
        for bench in chosen:
            found = bench(args.repeat)
            rows += found if isinstance(found, list) else [found]
        text = render(rows, args.repeat)
        print(text)
        if args.out:
            Path(args.out).write_text(text)
        return 0
    notebooks = [p for p in NOTEBOOKS if args.only in p.name]
    if not notebooks:
        parser.error(f"--only {args.only!r} matches no notebook in {ROOT / 'notebooks'}")
    rows = [
        bench_import(args.repeat),
        bench_graph(args.repeat),
        *bench_doctor(args.repeat),
        bench_explainer(args.repeat),
        bench_explainer_small(args.repeat),
        *bench_widgets(),
    ]
    if not args.skip_notebooks:
        per_notebook, suite = bench_notebooks(args.repeat, notebooks)
        rows += [*suite, *per_notebook]
    if not args.skip_make_test and not args.only:
        rows += bench_make_test()
    text = render(rows, args.repeat)
    print(text)
    partial = bool(args.only) or args.skip_notebooks or args.skip_make_test
    out = args.out or (None if partial else ROOT / "BENCHMARKS.md")
    if out is not None:
        Path(out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
