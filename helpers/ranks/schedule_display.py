"""Pictures and tables of what PyTorch's engines did (notebook 07b), drawn from what ranks recorded.

- `schedule_figure`: the actions each rank recorded on the time grid of
  `helpers.ranks.pipeline_schedule`, a row per rank, the empty slots (the bubble) left white.
- `memory_figure`: the activation bytes each rank held after each of its actions.
- `bucket_figure`: what each of DDP's all-reduces carried, per step.
- `traffic_table`: bytes that crossed the wire per step, by kind, for each way of splitting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from helpers.display import Figure, Table, drawn_in_language, figure_words
from helpers.language import say
from helpers.ranks.pipeline_schedule import Action, bubble, schedule_slots

__all__ = [
    "bubble",  # from helpers.ranks.pipeline_schedule, with the grid it measures
    "bucket_figure",
    "memory_figure",
    "schedule_figure",
    "schedule_slots",  # from helpers.ranks.pipeline_schedule
    "source_excerpt",
    "traffic_table",
]

FORWARD, BACKWARD = "#9ecae1", "#fdae6b"  # light blue and light orange, as in the graphs


@drawn_in_language
def schedule_figure(runs: Mapping[str, Mapping[int, Sequence[Action]]]) -> Figure:
    """One timeline per schedule: a row per rank, a box per forward (F) and backward (B)."""
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.patches import Rectangle

    placed = {name: schedule_slots(actions) for name, actions in runs.items()}
    span = max(t for s in placed.values() for p in s.values() for _, t in p) + 1
    fig = MplFigure(figsize=(0.5 * span + 1.6, 1.2 * sum(len(s) for s in placed.values()) + 0.4))
    axes = fig.subplots(len(placed), 1, squeeze=False)[:, 0]
    for ax, (name, slots) in zip(axes, placed.items(), strict=True):
        for rank, actions in slots.items():
            for (kind, mb), t in actions:
                colour = FORWARD if kind == "F" else BACKWARD
                ax.add_patch(Rectangle((t, -rank - 0.4), 0.95, 0.8, color=colour))
                ax.text(t + 0.47, -rank, f"{kind}{mb}", ha="center", va="center", fontsize=9)
        ax.set_xlim(0, span)
        ax.set_ylim(-len(slots) + 0.45, 0.55)
        ax.set_yticks([-r for r in slots], [figure_words("rank", rank=r) for r in slots])
        ax.set_xticks(range(span + 1))
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.25)
        share = f"{bubble(slots):.0%}"
        ax.set_title(figure_words("schedule_title", name=name, bubble=share), fontsize=10)
    axes[-1].set_xlabel(figure_words("time_slot"))
    fig.tight_layout()
    bubbles = "; ".join(
        say("common", "figures.schedule_bubble", name=n, bubble=f"{bubble(s):.0%}")
        for n, s in placed.items()
    )
    return Figure(fig, description=say("common", "figures.schedule_description", bubbles=bubbles))


@drawn_in_language
def memory_figure(bytes_held: Mapping[str, Mapping[int, Sequence[int]]]) -> Figure:
    """Activation bytes held after each action, a line per rank, a panel per schedule."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(8, 2.8))
    axes = fig.subplots(1, len(bytes_held), sharey=True, squeeze=False)[0]
    for ax, (name, by_rank) in zip(axes, bytes_held.items(), strict=True):
        for rank, held in by_rank.items():
            ax.step(
                range(1, len(held) + 1), held, where="post", label=figure_words("rank", rank=rank)
            )
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(figure_words("action_on_rank"))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(figure_words("bytes_held"))
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    peaks = "; ".join(
        say("common", "figures.peak", name=n, peaks=", ".join(str(max(h)) for h in r.values()))
        for n, r in bytes_held.items()
    )
    return Figure(fig, description=say("common", "figures.memory_description", peaks=peaks))


@drawn_in_language
def bucket_figure(steps: Sequence[Sequence[Mapping[str, Any]]]) -> Figure:
    """DDP's all-reduces in each step, in the order they ran: a bar per bucket, its parameters."""
    from matplotlib.figure import Figure as MplFigure

    lines = max(len(b["parameters"]) for buckets in steps for b in buckets) + 1
    row = 0.14 * lines + 0.35  # inches per step: room for a bucket's label, one line a name
    fig = MplFigure(figsize=(8, 0.9 + row * len(steps)))
    ax = fig.add_subplot()
    for r, buckets in enumerate(steps):
        left = 0
        for b in buckets:
            ax.barh(-r, b["bytes"], left=left, color=FORWARD, edgecolor="black", height=0.85)
            heading = figure_words("bucket", bucket=b["bucket"], bytes=b["bytes"])
            label = "\n".join([heading, *b["parameters"]])
            ax.text(left + b["bytes"] / 2, -r, label, ha="center", va="center", fontsize=7)
            left += b["bytes"]
    ticks = [figure_words("step", step=r + 1) for r in range(len(steps))]
    ax.set_yticks([-r for r in range(len(steps))], ticks)
    ax.set_xlabel(figure_words("bytes_all_reduced"))
    ax.set_title(figure_words("buckets_title"), fontsize=10)
    fig.tight_layout()
    counts = ", ".join(str(len(b)) for b in steps)
    return Figure(fig, description=say("common", "figures.buckets_description", counts=counts))


def traffic_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """What crossed the wire in one training step, for each way of splitting."""
    return Table(["split", "what crosses", "messages", "bytes per step"], list(rows))


def source_excerpt(function: Any, needle: str, before: int = 2, after: int = 3) -> Any:
    """The lines of `function`'s real source around the first line containing `needle`, with
    their line numbers in the file: how a notebook quotes an engine's own code."""
    import inspect

    from helpers.source import SourceView

    lines, first = inspect.getsourcelines(function)
    hits = [i for i, line in enumerate(lines) if needle in line]
    if not hits:
        raise ValueError(f"{function.__qualname__}'s source has no line containing {needle!r}")
    start, end = max(0, hits[0] - before), min(len(lines), hits[0] + after + 1)
    text = "".join(f"{first + i:5d}  {lines[i]}" for i in range(start, end))
    path = inspect.getsourcefile(function) or function.__module__
    where = path[path.index("torch/") :] if "torch/" in path else path
    return SourceView([(f"{function.__qualname__} · {where}", text)])
