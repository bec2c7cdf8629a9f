"""Interactive explorers: thin ipywidgets over plain functions that pytest calls.

What they compute lives in `helpers.interactive.explorers` (graph explorer, optimizer lab) and
`helpers.interactive.backward_recorder` (backward stepper); how it is drawn, in
`helpers.interactive.widget_pictures`; a widget and its picture as one output, in
`helpers.interactive.live`.

    from helpers.interactive.widgets import graph_explorer, backward_stepper, optimizer_lab
    graph_explorer()

Each explorer is one output whose bundle carries the live widget *and* a static snapshot of its
initial state: an SVG picture (graph, figure and tables drawn together) and the same content as
text. A frontend with a running kernel (JupyterLab, Colab) shows only the live widget. A viewer
that cannot render widgets shows the picture (nbconvert and nbviewer do when the notebook has no
saved widget state; with saved state they draw the saved widgets with the HTML manager from
unpkg.com instead, whose HTML panes hold the same picture). nbval compares the text. The widgets
use only the core API common to ipywidgets 7 (Colab) and 8, and never write into an Output
widget, so displaying one prints nothing. `Explorer` is the scaffold the three share: it wires
their controls to their `update`, lays out their rows and takes the snapshot.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import torch

from helpers.interactive.backward_recorder import (
    BackwardRecord,
    Frame,
    backward_frame,
    default_backward_example,
    record_backward,
)
from helpers.interactive.explorers import (
    ARRANGEMENTS,
    LOSSES,
    OPTIMIZERS,
    ExplorerResult,
    OptimizerRun,
    explore_graph,
    optimizer_run,
)
from helpers.interactive.live import LiveWidget, WidgetFactory, hint
from helpers.interactive.widget_pictures import figure_html, graph_html, snapshot_svg, table_html
from helpers.language import phrase, say
from helpers.params import redraw_diff_figure

__all__ = [
    "BackwardStepper",
    "Explorer",
    "GraphExplorer",
    "OptimizerLab",
    "backward_stepper",
    "graph_explorer",
    "optimizer_lab",
]


def _pre(text: str) -> str:
    return (
        '<pre style="margin: 0 12px 0 0; padding: 6px; background: #f6f8fa; font-size: 12px; '
        f'line-height: 1.35">{html.escape(text)}</pre>'
    )


def _caption(text: str) -> str:
    return f'<div style="font-size: 13px; margin: 4px 0">{html.escape(text)}</div>'


class Explorer(LiveWidget):
    """The scaffold of every explorer: named controls, each change of which re-runs a plain
    function (`update`) and redraws the panes, laid out in `rows`; its snapshot (`snapshot`: a
    title, text parts and pictures) is its first state.

    A subclass makes its controls and panes, then calls this `__init__`."""

    #: The class of the outer box, by which the browser test finds the widget.
    box_class = ""

    def __init__(self, make: WidgetFactory, controls: dict[str, Any]) -> None:
        self.controls = controls
        self.update()
        for control in controls.values():
            control.observe(self.update, names="value")
        box = make("VBox", children=self.rows(make))
        box.add_class(self.box_class)
        title, texts, pictures = self.snapshot()
        super().__init__(
            box,
            text="\n\n".join([title, hint(), *texts]),
            svg=snapshot_svg(*pictures, title=title),
        )

    def settings(self) -> dict[str, Any]:
        """The controls' current values, by name."""
        return {name: c.value for name, c in self.controls.items()}

    def update(self, _change: object = None) -> None:
        """Compute for the controls' current values and redraw the panes."""
        raise NotImplementedError

    def rows(self, make: WidgetFactory) -> list[Any]:
        """The widget's rows, top to bottom: controls and panes."""
        raise NotImplementedError

    def snapshot(self) -> tuple[str, list[str], list[Any]]:
        """The first state: its title, its text parts, and what its picture draws."""
        raise NotImplementedError


class GraphExplorer(Explorer):
    """Three toggles on a cut between two models; the code, graph and state table follow."""

    box_class = "autograd-graph-explorer"

    def __init__(
        self, detach: bool = False, input_requires_grad: bool = False, retain_grad: bool = False
    ) -> None:
        make = WidgetFactory()
        controls = {
            "detach": make.checkbox(say("common", "widgets.detach"), detach),
            "input_requires_grad": make.checkbox(
                say("common", "widgets.input_requires_grad"), input_requires_grad
            ),
            "retain_grad": make.checkbox(say("common", "widgets.retain_grad"), retain_grad),
        }
        self.code = make("HTML")
        self.picture = make("HTML")
        self.table = make("HTML")
        self.result: ExplorerResult | None = None
        super().__init__(make, controls)

    def settings(self) -> dict[str, bool]:
        """The toggles' current values."""
        return {name: bool(value) for name, value in super().settings().items()}

    def update(self, _change: object = None) -> None:
        """Re-run the program for the current toggles and redraw."""
        self.result = explore_graph(**self.settings())
        self.code.value = _pre(self.result.code)
        self.picture.value = graph_html(
            self.result.graph, alt=say("common", "explorer_code.graph_alt")
        )
        self.table.value = table_html(self.result.table)

    def rows(self, make: WidgetFactory) -> list[Any]:
        row = make.row(list(self.controls.values()))
        return [row, make.row([self.code, self.picture]), self.table]

    def snapshot(self) -> tuple[str, list[str], list[Any]]:
        result = self.result
        assert result is not None
        settings = ", ".join(f"{k}={v}" for k, v in self.settings().items())
        title = say("common", "widgets.graph_explorer", settings=settings)
        return (
            title,
            [result.code, result.graph.text(), repr(result.table)],
            [result.code, result.graph, result.table],
        )


Build = Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]


class BackwardStepper(Explorer):
    """A slider through a backward pass in the engine's order, and a retain_graph toggle."""

    box_class = "autograd-backward-stepper"

    def __init__(
        self,
        build: Build = default_backward_example,
        *,
        start: int = 0,
        retain_graph: bool = False,
    ) -> None:
        make = WidgetFactory()
        self.build = build
        self._records: dict[bool, BackwardRecord] = {}
        self._frames: dict[tuple[bool, int], Frame] = {}
        self.last = len(self.record(retain_graph).steps) + 1
        self.slider = make(
            "IntSlider",
            value=start,
            min=0,
            max=self.last,
            step=1,
            description=say("common", "widgets.step"),
            continuous_update=True,
            layout=make.new_layout(width="420px"),
        )
        self.retain = make.checkbox("backward(retain_graph=True)", retain_graph)
        self.caption = make("HTML")
        self.picture = make("HTML")
        self.table = make("HTML")
        self.frame: Frame | None = None
        super().__init__(make, {"step": self.slider, "retain_graph": self.retain})

    def record(self, retain_graph: bool) -> BackwardRecord:
        """The recorded backward pass for this retain_graph setting (built and run once)."""
        if retain_graph not in self._records:
            root, params = self.build()
            self._records[retain_graph] = record_backward(root, params, retain_graph=retain_graph)
        return self._records[retain_graph]

    def update(self, _change: object = None) -> None:
        """Show the frame for the slider's position and the toggle's setting."""
        key = (bool(self.retain.value), int(self.slider.value))
        if key not in self._frames:
            self._frames[key] = backward_frame(self.record(key[0]), key[1])
        self.frame = self._frames[key]
        self.caption.value = _caption(self.frame.caption)
        self.picture.value = graph_html(self.frame.graph, alt=self.frame.caption)
        self.table.value = table_html(self.frame.table)

    def rows(self, make: WidgetFactory) -> list[Any]:
        note = say("common", "stepper.note", last_step=self.last - 1, last=self.last)
        return [
            make.row([self.slider, self.retain]),
            make("HTML", value=_caption(note)),
            self.caption,
            make.row([self.picture, self.table]),
        ]

    def snapshot(self) -> tuple[str, list[str], list[Any]]:
        frame = self.frame
        assert frame is not None
        now = self.settings()
        title = say("common", "stepper.title", start=now["step"], retain_graph=now["retain_graph"])
        return (
            title,
            [frame.caption, frame.graph.text(), repr(frame.table)],
            [frame.caption, frame.graph, frame.table],
        )


class OptimizerLab(Explorer):
    """Optimizer, learning rate, set_to_none and arrangement for one split-learning step.

    It shows the code it runs (`optimizer_run` executes `optimizer_code`'s lines), which `step()`
    moved which model, the heatmaps of Δ and which parameters moved by how much.

    `loss` (fixed for the widget's life, not a control): the post's loss or the per-token one.
    """

    box_class = "autograd-optimizer-lab"

    def __init__(
        self,
        optimizer: str = "Adam",
        lr: float = 0.01,
        set_to_none: bool = True,
        arrangement: str = ARRANGEMENTS[0],
        loss: str = LOSSES[0],
    ) -> None:
        self.loss = loss
        make = WidgetFactory()
        controls = {
            "optimizer": make(
                "Dropdown",
                options=[(phrase(None, o), o) for o in OPTIMIZERS],
                value=optimizer,
                description=say("common", "widgets.optimizer"),
                layout=make.new_layout(width="260px"),
            ),
            "lr": make(
                "FloatLogSlider",
                value=lr,
                base=10,
                min=-4,
                max=0,
                step=0.5,
                description="lr",
                readout_format=".4g",
                continuous_update=False,
            ),
            "set_to_none": make.checkbox("zero_grad(set_to_none=True)", set_to_none),
            "arrangement": make(
                "ToggleButtons",
                options=[(phrase(None, a), a) for a in ARRANGEMENTS],
                value=arrangement,
                style={"button_width": "150px"},
            ),
        }
        self.code = make("HTML")
        self.moves = make("HTML")
        self.picture = make("HTML")
        self.table = make("HTML")
        self.run: OptimizerRun | None = None
        super().__init__(make, controls)

    def update(self, _change: object = None) -> None:
        """Run one split step with the current setting and redraw."""
        s = self.settings()
        args = (s["optimizer"], float(s["lr"]), bool(s["set_to_none"]), s["arrangement"])
        self.run = optimizer_run(*args, loss=self.loss)
        self.code.value = _pre(self.run.code)  # the lines that just ran
        self.moves.value = table_html(self.run.moves_table())
        # The heatmaps keep their layout from change to change: redraw them in place (fast).
        shown = getattr(self, "_shown", None)
        if shown is None or not redraw_diff_figure(shown, self.run.diff, self.run.figure_title()):
            shown = self._shown = self.run.figure()
        self.picture.value = figure_html(shown)
        self.table.value = table_html(self.run.diff)

    def rows(self, make: WidgetFactory) -> list[Any]:
        c = self.controls
        return [
            make.row([c["optimizer"], c["lr"]]),
            make.row([c["arrangement"], c["set_to_none"]]),
            make.row([self.code, self.moves]),
            self.picture,
            self.table,
        ]

    def snapshot(self) -> tuple[str, list[str], list[Any]]:
        run = self.run
        assert run is not None
        title = say("common", "widgets.optimizer_lab", settings=run.setting())
        moves, moved = run.moves_table(), run.moved_table()
        return title, [run.code, repr(moves), repr(moved)], [run.code, moves, run.figure(), moved]


def graph_explorer(
    detach: bool = False, input_requires_grad: bool = False, retain_grad: bool = False
) -> GraphExplorer:
    """Toggles for detach at the cut, requires_grad on the input, retain_grad on h: live graph."""
    return GraphExplorer(detach, input_requires_grad, retain_grad)


def backward_stepper(
    build: Build = default_backward_example,
    start: int = 0,
    retain_graph: bool = False,
) -> BackwardStepper:
    """Walk a backward pass node by node; `build()` returns a fresh (root, named tensors)."""
    return BackwardStepper(build, start=start, retain_graph=retain_graph)


def optimizer_lab(
    optimizer: str = "Adam",
    lr: float = 0.01,
    set_to_none: bool = True,
    arrangement: str = ARRANGEMENTS[0],
    loss: str = LOSSES[0],
) -> OptimizerLab:
    """One split step of the post's three models under a chosen optimizer setting.

    `loss="per token"` uses the loss the post meant, so every parameter has a real gradient.
    """
    return OptimizerLab(optimizer, lr, set_to_none, arrangement, loss)
