"""The explainer's cost on a training step, against the same step bare and under anomaly mode,
in one run, as ratios (issue goal: at most 1.3x bare).

    python -m tests.runners.bench_explain [--repeat N]

An MLP 784-256-10 on a batch of 64 (SGD with momentum), one thread, as the reference on anomaly
mode's cost measured it. The three ways alternate within each round so all see the same machine
load; each round's time is the median of its steps, and the ratio is the median over rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings

import torch
from torch import nn

from helpers.explain.watch import Watch


def _step(model, optimizer, x, y) -> None:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


def measure(repeat: int = 15, steps: int = 40) -> dict[str, float]:
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
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is slow on every entry
        for _ in range(5):
            for way in ways.values():
                with way():
                    _step(model, optimizer, x, y)
        for _ in range(repeat):
            for name, way in ways.items():
                times = []
                for _ in range(steps):
                    start = time.perf_counter()
                    with way():
                        _step(model, optimizer, x, y)
                    times.append(time.perf_counter() - start)
                seconds[name].append(statistics.median(times))
    bare = statistics.median(seconds["bare"])
    rounds = list(zip(*(seconds[n] for n in ways), strict=True))
    return {
        "bare ms": bare * 1e3,
        "explainer / bare": statistics.median(e / b for b, e, _ in rounds),
        "anomaly / bare": statistics.median(a / b for b, _, a in rounds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    for name, value in measure(args.repeat).items():
        print(f"{name:18} {value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
