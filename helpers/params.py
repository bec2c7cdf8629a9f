"""Parameter snapshots and what changed between two of them, as numbers, a table and heatmaps."""

from __future__ import annotations

import math
import textwrap
import unicodedata
from dataclasses import dataclass

import torch

from helpers import naming
from helpers.display import Figure, Stack, Table, drawn_in_language, figure_words
from helpers.language import say
from helpers.shapes import shape_text

__all__ = [
    "ParamChange",
    "ParamDiff",
    "ParamDiffReport",
    "diff_figure",
    "param_diff",
    "redraw_diff_figure",
    "show_param_diff",
    "snapshot",
]

DIFF_COLUMNS = ["parameter", "shape", "changed", "elements changed", "max |Δ|", "norm of Δ"]


def named_tensors(obj: object, argument: str) -> dict[str, torch.Tensor]:
    """Name -> tensor (`helpers.naming`), at least one: something to compare."""
    result = naming.named_tensors(obj, argument)
    if not result:
        raise ValueError(f"{argument} has no parameters to compare")
    return result


def snapshot(model_or_params: object) -> dict[str, torch.Tensor]:
    """Detached copies of a model's parameters (or of named tensors), to compare with later."""
    return {
        name: t.detach().clone() for name, t in named_tensors(model_or_params, "snapshot()").items()
    }


@dataclass(frozen=True)
class ParamChange:
    """How one parameter changed."""

    name: str
    shape: tuple[int, ...]
    numel: int
    n_changed: int
    max_abs: float
    norm: float
    delta: torch.Tensor

    @property
    def changed(self) -> bool:
        """Whether any element changed."""
        return self.n_changed > 0


class ParamDiff(Table):
    """Per-parameter changes between two snapshots, as a table."""

    def __init__(self, changes: list[ParamChange], title: str | None = None) -> None:
        self.changes = changes
        rows = [
            {
                "parameter": c.name,
                "shape": shape_text(c.shape),
                "changed": c.changed,
                "elements changed": f"{c.n_changed} / {c.numel}",
                "max |Δ|": float(f"{c.max_abs:.3g}"),
                "norm of Δ": float(f"{c.norm:.3g}"),
            }
            for c in changes
        ]
        super().__init__(DIFF_COLUMNS, rows, title=title)

    @property
    def changed(self) -> list[str]:
        """Names of the parameters that changed."""
        return [c.name for c in self.changes if c.changed]

    @property
    def unchanged(self) -> list[str]:
        """Names of the parameters that did not change."""
        return [c.name for c in self.changes if not c.changed]

    def __getitem__(self, name: str) -> ParamChange:
        for c in self.changes:
            if c.name == name:
                return c
        raise KeyError(
            f"no parameter {name!r}; parameters are: {', '.join(self.column('parameter'))}"
        )


def param_diff(before: object, after: object, title: str | None = None) -> ParamDiff:
    """Compare two snapshots (or a snapshot and a live model) parameter by parameter."""
    old = named_tensors(before, "before")
    new = named_tensors(after, "after")
    if old.keys() != new.keys():
        missing = sorted(old.keys() - new.keys())
        extra = sorted(new.keys() - old.keys())
        raise ValueError(
            "before and after name different parameters "
            f"(only in before: {missing or 'none'}; only in after: {extra or 'none'}). "
            "Take the snapshot of the same model you compare with."
        )
    changes = []
    for name, a in old.items():
        b = new[name]
        if a.shape != b.shape:
            raise ValueError(
                f"parameter {name!r} has shape {shape_text(a)} before but {shape_text(b)} after"
            )
        delta = b.detach().to(torch.float64) - a.detach().to(torch.float64)
        changes.append(
            ParamChange(
                name=name,
                shape=tuple(a.shape),
                numel=a.numel(),
                n_changed=int((delta != 0).sum()),
                max_abs=float(delta.abs().max()) if delta.numel() else 0.0,
                norm=float(delta.norm()),
                delta=delta,
            )
        )
    return ParamDiff(changes, title=title)


def _as_matrix(delta: torch.Tensor) -> torch.Tensor:
    if delta.dim() == 0:
        return delta.reshape(1, 1)
    if delta.dim() == 1:
        return delta.reshape(1, -1)
    return delta.reshape(delta.shape[0], -1)


# The heatmap grid's layout, in inches. Every heatmap is an image in one shared Axes (an Axes per
# parameter costs more to build and draw than the images themselves), and the margins are fixed,
# so the figure is drawn once: no tight-crop second pass.
CELL_WIDTH, CELL_HEIGHT = 2.6, 1.9  # one parameter: its two-line title, then its heatmap
CELL_GAP, CELL_TITLE = 0.25, 0.42  # space between heatmaps; room for a heatmap's title
LEFT, COLOURBAR_GAP, COLOURBAR_WIDTH, COLOURBAR_ROOM = 0.15, 0.1, 0.13, 0.95  # room: ticks, label
TITLE_ROOM, TITLE_LINE, BOTTOM = 0.15, 0.18, 0.12
TITLE_CHARS_PER_INCH = 11  # suptitle at 10 pt: wrap it so it never runs past the figure's edge


@drawn_in_language
def diff_figure(diff: ParamDiff, title: str | None = None, columns: int = 4) -> Figure:
    """Heatmaps of Δ per parameter on one shared, symmetric colour scale (white = unchanged)."""
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.patches import Rectangle

    changes = diff.changes
    columns = max(1, min(columns, len(changes)))
    rows = max(1, math.ceil(len(changes) / columns))
    grid_width, grid_height = CELL_WIDTH * columns, CELL_HEIGHT * rows
    width = LEFT + grid_width + COLOURBAR_GAP + COLOURBAR_WIDTH + COLOURBAR_ROOM
    title_lines = _title_lines(title, width)
    top_room = TITLE_ROOM + TITLE_LINE * len(title_lines)
    height = BOTTOM + grid_height + top_room
    fig = MplFigure(figsize=(width, height))
    # One Axes over the grid, its data coordinates in inches from the grid's bottom-left corner.
    grid = fig.add_axes((LEFT / width, BOTTOM / height, grid_width / width, grid_height / height))
    grid.set_xlim(0, grid_width)
    grid.set_ylim(0, grid_height)
    grid.set_axis_off()
    largest = max((c.max_abs for c in changes), default=0.0) or 1.0
    norm = Normalize(vmin=-largest, vmax=largest)
    image = None
    for k, change in enumerate(changes):
        left = (k % columns) * CELL_WIDTH
        top = grid_height - (k // columns) * CELL_HEIGHT - CELL_TITLE
        right, bottom = left + CELL_WIDTH - CELL_GAP, top - (CELL_HEIGHT - CELL_TITLE - CELL_GAP)
        image = grid.imshow(
            _as_matrix(change.delta).numpy(),
            cmap="RdBu_r",
            norm=norm,
            aspect="auto",
            interpolation="nearest",
            extent=(left, right, bottom, top),
        )
        grid.add_patch(
            Rectangle((left, bottom), right - left, top - bottom, fill=False, linewidth=0.8)
        )
        grid.text(
            (left + right) / 2,
            top + 0.05,
            _cell_title(change),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    if image is not None:
        span = (grid_height - CELL_TITLE - CELL_GAP) * 0.85
        bar = fig.add_axes(
            (
                (LEFT + grid_width + COLOURBAR_GAP) / width,
                (BOTTOM + CELL_GAP + (grid_height - CELL_TITLE - CELL_GAP - span) / 2) / height,
                COLOURBAR_WIDTH / width,
                span / height,
            )
        )
        fig.colorbar(image, cax=bar, label=figure_words("heatmap_colour_bar"))
    fig.suptitle("\n".join(title_lines), fontsize=10, y=1 - 0.08 / height, va="top")
    return Figure(fig, description=_heatmap_description(diff), tight=False)


def _title_lines(title: str | None, width: float) -> list[str]:
    """The figure's title, wrapped to its width (a Chinese character is about two Latin wide)."""
    title = title or figure_words("heatmap_title")
    chars = int(width * TITLE_CHARS_PER_INCH)
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in title)
    return textwrap.wrap(title, max(8, chars // 2) if wide > len(title) / 3 else chars)


def _heatmap_description(diff: ParamDiff) -> str:
    names = ", ".join(diff.changed) or say("common", "figures.none")
    return say("common", "figures.heatmap_description", names=names)


def _cell_title(change: ParamChange) -> str:
    return figure_words(
        "heatmap_cell", name=change.name, changed=change.n_changed, total=change.numel
    )


def redraw_diff_figure(figure: Figure, diff: ParamDiff, title: str | None = None) -> bool:
    """Redraw a `diff_figure` for another diff of the same parameters by updating its artists
    (images, colour scale, titles) instead of building a new figure; a widget does this on every
    change of a control. Returns False, changing nothing, when the layout cannot be kept (other
    parameters or shapes, a title of another number of lines): build a new one then.
    """
    mpl = figure.figure
    grid = mpl.axes[0]
    images, texts = grid.images, grid.texts
    changes = diff.changes
    width = mpl.get_figwidth()
    lines = _title_lines(title, width)
    suptitle = mpl._suptitle
    same = (
        len(changes) > 0
        and len(images) == len(changes) == len(texts)
        and all(
            i.get_array().shape == _as_matrix(c.delta).shape
            and t.get_text().split("\n")[0] == c.name
            for i, t, c in zip(images, texts, changes, strict=True)
        )
        and suptitle is not None
        and len(suptitle.get_text().split("\n")) == len(lines)
    )
    if not same:
        return False
    largest = max((c.max_abs for c in changes), default=0.0) or 1.0
    # The norm is shared by every image and the colour bar: set both limits at once, so the
    # colour bar recomputes itself once, not once per limit.
    images[0].set_clim(-largest, largest)
    for image, text, change in zip(images, texts, changes, strict=True):
        image.set_data(_as_matrix(change.delta).numpy())
        text.set_text(_cell_title(change))
    suptitle.set_text("\n".join(lines))  # the colour bar reads the shared norm when drawn
    figure.description = _heatmap_description(diff)
    figure.forget_drawing()
    return True


class ParamDiffReport(Stack):
    """Heatmaps and table of a ParamDiff, shown as two outputs; `.diff` holds the numbers."""

    def __init__(self, diff: ParamDiff, title: str | None = None) -> None:
        super().__init__(diff_figure(diff, title=title), diff)
        self.diff = diff


def show_param_diff(before: object, after: object, title: str | None = None) -> ParamDiffReport:
    """Show what changed: heatmaps of Δ (shared colour scale) and the per-parameter table."""
    return ParamDiffReport(param_diff(before, after, title=title), title=title)
