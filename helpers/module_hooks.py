"""Module hooks, shown: the order in which nn.Module's four hooks, tensor hooks and
AccumulateGrad ran, and what hooks measure per layer.

Notebook 09b registers every kind of hook on a small model in a cell, each writing down
(kind of hook, what it is on) as it runs, and shows the list:

    event_table(events)                 # events: [("forward pre-hook", "0 (Linear)"), ...]

`layer_statistics` is the everyday use: a forward hook per layer records its activations' spread
and hangs a tensor hook on its output for the gradient arriving there; `statistics_figure` draws
both per layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from helpers.display import Figure, Table, drawn_in_language, figure_words
from helpers.language import say

__all__ = ["event_table", "layer_statistics", "statistics_figure"]


def _label(name: str, module: nn.Module) -> str:
    return f"{name} ({type(module).__name__})"


def event_table(events: Sequence[tuple[str, str]]) -> Table:
    """The recorded hooks as a table: order, pass (forward or backward), hook, what it is on."""
    rows = [
        {
            "#": i,
            "pass": "forward" if kind.startswith("forward") else "backward",
            "hook": kind,
            "on": on,
        }
        for i, (kind, on) in enumerate(events, start=1)
    ]
    return Table(["#", "pass", "hook", "on"], rows)


def layer_statistics(model: nn.Module, x: Tensor, y: Tensor) -> list[dict[str, Any]]:
    """One forward and backward of mse(model(x), y) with a forward hook per layer: it records the
    layer's activation standard deviation, and puts a tensor hook on the output that records the
    norm of the gradient arriving there. Layers are the model's children that have parameters.

    (A backward pre-hook receives the same gradient, but when the model's input needs no
    gradient, torch warns about the first layer's backward hooks; a tensor hook has no such
    case.)"""
    stats: dict[str, dict[str, Any]] = {}
    handles = []
    for name, module in model.named_children():
        if not any(True for _ in module.parameters()):
            continue
        stats[name] = {"layer": _label(name, module)}

        def record_gradient(grad: Tensor, name: str) -> None:
            stats[name]["output gradient norm"] = float(grad.norm())

        def record_output(m, args, out, name=name):
            stats[name]["activation std"] = float(out.detach().std())
            out.register_hook(lambda grad: record_gradient(grad, name))

        handles.append(module.register_forward_hook(record_output))
    try:
        nn.functional.mse_loss(model(x), y).backward()
    finally:
        for handle in handles:
            handle.remove()
    return list(stats.values())


@drawn_in_language
def statistics_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Per layer, from the first to the last: activation std and output-gradient norm."""
    from matplotlib.figure import Figure as MplFigure

    labels = [r["layer"].split(" ")[0] for r in rows]
    fig = MplFigure(figsize=(8, 2.8))  # pragma: no mutate (size, by eye)
    left, right = fig.subplots(1, 2)
    left.bar(labels, [r["activation std"] for r in rows], color="#4c72b0")  # pragma: no mutate
    left.set_ylabel(figure_words("activation_std"))
    gradient_norms = [r["output gradient norm"] for r in rows]
    right.bar(labels, gradient_norms, color="#dd8452")  # pragma: no mutate (colour, by eye)
    right.set_ylabel(figure_words("output_gradient_norm"))
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel(figure_words("layer_axis"))
        ax.grid(axis="y", alpha=0.3)  # pragma: no mutate (a faint grid, by eye)
    fig.tight_layout()
    first, last = rows[0], rows[-1]
    ends = say(
        "common",
        "figures.hooks_ends",
        first=f"{first['output gradient norm']:.2g}",
        first_layer=labels[0],
        last=f"{last['output gradient norm']:.2g}",
        last_layer=labels[-1],
    )
    return Figure(fig, description=say("common", "figures.hooks_description", ends=ends))
