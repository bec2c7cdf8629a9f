"""`make bench`: the course measured against its physical floor, in one run, as ratios.

    python -m tests.bench [--repeat N] [--out BENCHMARKS.md]

1. The whole notebook suite vs its floor: as many fresh kernels that only `import torch, helpers`.
   Notebook runs and floor runs alternate, so both see the same machine load.
2. Each notebook's Run All time minus the floor.
3. `show_graph` (build + SVG + text form) vs raw torchviz (build + SVG) on a ~1,200-edge graph.
4. `import torch, helpers` over `import torch`, in fresh interpreters.

It prints a table and writes it to BENCHMARKS.md. Nothing in it is typed in by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TARGET_SUITE_RATIO = 1.5
TARGET_ABOVE_FLOOR = {"07_split_across_processes.ipynb": 10.0}
DEFAULT_ABOVE_FLOOR = 3.0
TARGET_GRAPH_RATIO = 1.1
TARGET_IMPORT = 0.2


def run_notebook(path: Path | None) -> float:
    """Seconds to start a kernel and run `path` top to bottom (None: the floor notebook)."""
    import nbformat
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    if path is None:
        nb = new_notebook(cells=[new_code_cell("import torch\nimport helpers")])
        where = ROOT / "notebooks"
    else:
        nb = nbformat.read(path, as_version=4)
        where = path.parent
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(where)}}
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def bench_notebooks(repeat: int) -> tuple[list[dict], dict]:
    """Per-notebook and whole-suite timings, alternating notebook and floor runs."""
    rows, floor_total, suite_total = [], 0.0, 0.0
    for path in NOTEBOOKS:
        nb_times, floor_times = [], []
        for _ in range(repeat):
            floor_times.append(run_notebook(None))
            nb_times.append(run_notebook(path))
        nb_median, floor_median = statistics.median(nb_times), statistics.median(floor_times)
        suite_total += nb_median
        floor_total += floor_median
        above = nb_median - floor_median
        target = TARGET_ABOVE_FLOOR.get(path.name, DEFAULT_ABOVE_FLOOR)
        rows.append(
            {
                "measure": f"{path.name}: Run All minus floor",
                "value": f"{above:.2f} s (run {nb_median:.2f} s, floor {floor_median:.2f} s)",
                "target": f"≤ {target:g} s",
                "met": above <= target,
            }
        )
        print(rows[-1]["measure"], rows[-1]["value"], flush=True)
    ratio = suite_total / floor_total
    suite = {
        "measure": f"whole suite ({len(NOTEBOOKS)} notebooks) vs {len(NOTEBOOKS)} floor kernels",
        "value": f"{ratio:.2f}× ({suite_total:.1f} s vs {floor_total:.1f} s)",
        "target": f"≤ {TARGET_SUITE_RATIO:g}×",
        "met": ratio <= TARGET_SUITE_RATIO,
    }
    return rows, suite


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


def render(rows: list[dict], repeat: int) -> str:
    """The results as Markdown."""
    import torch

    cpu = platform.processor() or platform.machine()
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`tests/bench.py`); do not edit by hand. Medians of "
        f"{repeat} alternating runs, measured {datetime.date.today().isoformat()} on "
        f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
        f"torch {torch.__version__}.",
        "",
        "| measure | value | target | met |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['measure']} | {r['value']} | {r['target']} | {'yes' if r['met'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, print the table, write it to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    parser.add_argument("--skip-notebooks", action="store_true")
    args = parser.parse_args(argv)
    rows = [bench_import(args.repeat), bench_graph(args.repeat)]
    if not args.skip_notebooks:
        per_notebook, suite = bench_notebooks(args.repeat)
        rows += [suite, *per_notebook]
    text = render(rows, args.repeat)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
