"""Label leakage in split learning: a small binary task, a rank-based AUC, and the AUC plot.

Notebook 07 trains the three split models on `binary_task` data and scores, after every step,
how well the gradient the client received predicts each example's label (Li et al., "Label
Leakage and Protection in Two-party Split Learning", ICLR 2022, arXiv 2102.08504):

    x, y = binary_task(100, seed=1)
    auc(gradient.norm(dim=1), y)   # 1.0: every positive scores above every negative; 0.5: chance

Everything here is deterministic: the data come from a seeded `torch.Generator` in float64, and
`auc` depends only on the order of the scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from helpers.display import drawn_in_language
from helpers.naming import a_type
from helpers.shapes import shape_text

__all__ = ["RULE", "auc", "auc_figure", "binary_task"]

#: The direction in feature space that decides the label (features 0, 1 and 2; the rest is noise).
RULE = (1.0, -0.8, 0.6)


def _as_vector(values: Any, name: str) -> torch.Tensor:
    """`values` as a 1-D float64 tensor, or a TypeError/ValueError that says what was passed."""
    if isinstance(values, torch.Tensor):
        tensor = values.detach()
    elif isinstance(values, (list, tuple)):
        try:
            tensor = torch.tensor(values, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be numbers; got {values!r:.80}") from err
    else:
        raise TypeError(
            f"{name} must be a 1-D tensor or a list of numbers; got {a_type(values)}"
        )
    if tensor.dim() != 1:
        raise ValueError(
            f"{name} must be 1-D (one value per example); got shape {shape_text(tensor)}"
        )
    if tensor.is_complex():
        raise TypeError(f"{name} must be real numbers; got {tensor.dtype}")
    return tensor.to(torch.float64)


def auc(scores: torch.Tensor | Sequence[float], labels: torch.Tensor | Sequence[float]) -> float:
    """The area under the ROC curve of `scores` for binary `labels` (1 positive, 0 negative).

    Computed from ranks (Mann-Whitney U): the probability that a random positive scores above a
    random negative, ties counting one half. 1.0 is a perfect attack, 0.5 is guessing.
    """
    s = _as_vector(scores, "scores")
    y = _as_vector(labels, "labels")
    if len(s) != len(y):
        raise ValueError(f"scores and labels differ in length: {len(s)} vs {len(y)}")
    if torch.isnan(s).any():
        raise ValueError("scores contain NaN: an AUC needs every example to have a score")
    if not bool(((y == 0) | (y == 1)).all()):
        bad = sorted({float(v) for v in y[(y != 0) & (y != 1)].tolist()})[:5]
        raise ValueError(f"labels must be 0 or 1 (or False/True); got also {bad}")
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        raise ValueError(
            f"an AUC needs both classes; got {positives} positive(s) and {negatives} negative(s)"
        )
    order = torch.argsort(s, stable=True)
    _, group, counts = torch.unique_consecutive(s[order], return_inverse=True, return_counts=True)
    last = counts.cumsum(0).to(torch.float64)  # 1-based rank of each group's last member
    average = last - (counts.to(torch.float64) - 1) / 2  # tied scores share their average rank
    ranks = torch.empty_like(s)
    ranks[order] = average[group]
    u = ranks[y == 1].sum() - positives * (positives + 1) / 2
    return float(u / (positives * negatives))


def binary_task(
    n: int,
    *,
    features: int = 8,
    positive_share: float = 0.1,
    noise: float = 1.0,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` examples (float64 `x` [n, features], labels `y` [n] of 0.0 and 1.0), imbalanced.

    Features are standard normal. An example is positive when its score along `RULE`, plus
    Gaussian noise of std `noise`, is among the top `positive_share` of the `n` scores: exactly
    `round(n * positive_share)` positives, as in click or conversion data, where few are positive.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n must be an int >= 2; got {n!r}")
    if not isinstance(features, int) or isinstance(features, bool) or features < len(RULE):
        raise ValueError(f"features must be an int >= {len(RULE)}; got {features!r}")
    count = round(n * positive_share) if isinstance(positive_share, (int, float)) else -1
    if not 0 < count < n:
        raise ValueError(
            f"positive_share must leave both classes non-empty; {positive_share!r} of {n} "
            f"gives {max(count, 0)} positives"
        )
    if not isinstance(noise, (int, float)) or noise < 0:
        raise ValueError(f"noise must be a number >= 0; got {noise!r}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=generator, dtype=torch.float64)
    rule = torch.zeros(features, dtype=torch.float64)
    rule[: len(RULE)] = torch.tensor(RULE, dtype=torch.float64)
    score = x @ rule + noise * torch.randn(n, generator=generator, dtype=torch.float64)
    y = torch.zeros(n, dtype=torch.float64)
    y[torch.argsort(score, descending=True, stable=True)[:count]] = 1.0
    return x, y


@drawn_in_language
def auc_figure(curves: Mapping[str, Sequence[tuple[float, float]]]) -> Any:
    """Two panels, the norm attack's and the direction attack's AUC per step, a line per run.

    `curves` maps a run's name to its (norm AUC, direction AUC) after each step.
    """
    from matplotlib.figure import Figure as MplFigure

    from helpers.display import Figure, figure_phrase, figure_words
    from helpers.language import say

    if not curves or not all(len(c) for c in curves.values()):
        raise ValueError("curves needs at least one run with at least one step")
    fig = MplFigure(figsize=(9, 3.2))
    axes = fig.subplots(1, 2, sharey=True)
    titles = (figure_words("norm_attack"), figure_words("direction_attack"))
    for k, (ax, title) in enumerate(zip(axes, titles, strict=True)):
        for name, steps in curves.items():
            label = figure_phrase(name)  # a run's name, in the figure's language
            ax.plot(range(1, len(steps) + 1), [pair[k] for pair in steps], lw=1.5, label=label)
        ax.axhline(0.5, color="0.5", ls=":", lw=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(figure_words("training_step"))
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(figure_words("auc_axis"))
    axes[0].legend(fontsize=8, loc="lower left", ncol=2)
    steps = max(len(c) for c in curves.values())
    return Figure(
        fig, description=say("common", "figures.auc_description", runs=len(curves), steps=steps)
    )
