"""What the interactive explorers compute, as plain functions that pytest calls.

The widgets in `helpers.widgets` only read their controls, call one of these functions and put the
returned picture and table on screen. Everything here is ordinary data: code text, tensors,
`GraphData`, `Table`s and HTML strings.

- `explore_graph`: the graph explorer's program (a cut between two models) for one setting of its
  toggles, actually run, with its graph and `tensor_state` table.
- `record_backward` and `backward_frame`: a backward pass recorded node by node with hooks on
  every backward function, and the picture and table of any step of it.
- `optimizer_code` and `optimizer_run`: one split-learning step of the first post's three models
  with a chosen optimizer arrangement, as the lines of code the lab shows and then runs, with
  what each `step()` call moved and which parameters moved by how much (with the post's loss, or
  with the per-token loss it meant).
"""

from __future__ import annotations

import base64
import functools
import html
import io
import re
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from helpers.checks import clean_message
from helpers.display import Figure, Table
from helpers.graph import AutogradGraph, GraphData, GraphNode, autograd_graph, dot_available
from helpers.language import say
from helpers.params import ParamDiff, diff_figure, param_diff, snapshot
from helpers.state import describe_grad, tensor_state

__all__ = [
    "ARRANGEMENTS",
    "LOSSES",
    "NOISE",
    "OPTIMIZERS",
    "BackwardRecord",
    "BackwardStep",
    "ExplorerResult",
    "Frame",
    "OptimizerRun",
    "backward_frame",
    "compact_png",
    "default_backward_example",
    "explore_graph",
    "explorer_code",
    "figure_html",
    "graph_html",
    "optimizer_code",
    "optimizer_run",
    "record_backward",
    "snapshot_svg",
    "table_html",
]


# --------------------------------------------------------------------------------------------
# Rendering to HTML strings (what the widgets' HTML panes and the static fallbacks show)
# --------------------------------------------------------------------------------------------


def _img(mime: str, payload: bytes, alt: str) -> str:
    data = base64.b64encode(payload).decode("ascii")
    return (
        f'<img alt="{html.escape(alt)}" style="max-width: 100%; height: auto" '
        f'src="data:{mime};base64,{data}"/>'
    )


def graph_html(graph: AutogradGraph, alt: str = "autograd graph") -> str:
    """The graph as an <img> of its SVG, or as preformatted text when `dot` is missing."""
    if dot_available():
        bundle = graph._repr_mimebundle_()
        if "image/svg+xml" in bundle:
            return _img("image/svg+xml", bundle["image/svg+xml"].encode("utf-8"), alt)
        text = bundle["text/plain"]
    else:
        text = graph._repr_mimebundle_()["text/plain"]
    return f'<pre style="font-size: 11px">{html.escape(text)}</pre>'


def table_html(table: Table) -> str:
    """A Table as HTML with padded, ruled cells (widget panes get no notebook table styling)."""
    cell = 'style="text-align: left"'
    padded = 'style="text-align: left; padding: 2px 10px; border-bottom: 1px solid #e1e4e8"'
    return table._repr_html_().replace(cell, padded)


@functools.lru_cache(maxsize=16)  # the live picture and the static snapshot share one figure
def compact_png(png: bytes, colors: int = 64) -> bytes:
    """The PNG with at most `colors` colours (no dithering): heatmaps stay exact, bytes shrink."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=colors, dither=Image.Dither.NONE).save(out, format="PNG", optimize=True)
    return out.getvalue()


def figure_html(figure: Figure) -> str:
    """A helpers.display.Figure as an <img> of its PNG (palette-compressed)."""
    return _img("image/png", compact_png(figure.png()), figure.description)


# A static snapshot is one SVG picture: pictures and text blocks stacked top to bottom. It is what
# GitHub, nbviewer and nbconvert show for a widget (nbval does not compare SVG; the text/plain
# beside it carries the same content as text, and that is compared).

_FONT = 11  # px, monospace text blocks
_CHAR = 6.7  # px per monospace character at that size (DejaVu Sans Mono and similar)
_LINE = 14  # px per text line
_GAP = 10  # px between parts


@dataclass(frozen=True)
class _Part:
    width: float
    height: float
    body: str  # SVG fragment drawn at the origin; moved into place with a transform


def _graph_part(svg: str) -> _Part:
    match = re.search(r"<svg\b[^>]*>", svg)
    if match is None:
        raise ValueError("not an SVG document")
    head = match.group(0)
    size = {k: float(v) for k, v in re.findall(r'\b(width|height)="([0-9.]+)pt"', head)}
    view = re.search(r'viewBox="([^"]+)"', head)
    width, height = size.get("width", 300.0) * 4 / 3, size.get("height", 200.0) * 4 / 3
    inner = svg[match.end() : svg.rindex("</svg>")]
    view_box = f' viewBox="{view.group(1)}"' if view else ""
    return _Part(
        width,
        height,
        f'<svg width="{width:.0f}" height="{height:.0f}"{view_box}>{inner}</svg>',
    )


def _png_part(png: bytes) -> _Part:
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    data = base64.b64encode(png).decode("ascii")
    return _Part(
        width,
        height,
        f'<image width="{width}" height="{height}" href="data:image/png;base64,{data}" '
        f'xlink:href="data:image/png;base64,{data}"/>',
    )


def _text_part(text: str, heading: bool = False) -> _Part:
    lines = text.splitlines() or [""]
    rows = []
    for i, line in enumerate(lines):
        weight = ' font-weight="bold"' if heading else ""
        rows.append(
            f'<text x="0" y="{(i + 1) * _LINE - 3}"{weight} xml:space="preserve">'
            f"{html.escape(line)}</text>"
        )
    width = max(len(line) for line in lines) * _CHAR
    family = "DejaVu Sans Mono, Menlo, Consolas, monospace"
    return _Part(
        width,
        len(lines) * _LINE,
        f'<g font-family="{family}" font-size="{_FONT}">{"".join(rows)}</g>',
    )


def snapshot_svg(*parts: object, title: str | None = None) -> str:
    """One SVG stacking the parts: graphs (AutogradGraph or SVG text), figures, tables, text."""
    made: list[_Part] = []
    if title:
        made.append(_text_part(title, heading=True))
    for part in parts:
        if isinstance(part, AutogradGraph):
            if dot_available():
                made.append(_graph_part(part.pipe(format="svg", encoding="utf-8")))
            else:
                made.append(_text_part(part.text()))
        elif isinstance(part, Figure):
            made.append(_png_part(compact_png(part.png())))
        elif isinstance(part, bytes):
            made.append(_png_part(part))
        elif isinstance(part, str) and part.lstrip().startswith(("<?xml", "<svg")):
            made.append(_graph_part(part))
        elif isinstance(part, (Table, str)):
            made.append(_text_part(repr(part) if isinstance(part, Table) else part))
        else:
            raise TypeError(f"snapshot_svg() cannot draw a {type(part).__name__}")
    width = max((p.width for p in made), default=0) + 2 * _GAP
    y = _GAP
    placed = []
    for p in made:
        placed.append(f'<g transform="translate({_GAP},{y:.0f})">{p.body}</g>')
        y += p.height + _GAP
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'width="{width:.0f}" height="{y:.0f}" viewBox="0 0 {width:.0f} {y:.0f}">'
        f'<rect width="100%" height="100%" fill="white"/>{"".join(placed)}</svg>'
    )


# --------------------------------------------------------------------------------------------
# Graph explorer: a cut between two models, three toggles
# --------------------------------------------------------------------------------------------


def explorer_code(detach: bool, input_requires_grad: bool, retain_grad: bool) -> str:
    """The program the graph explorer runs for one setting of its three toggles."""
    rg = ", requires_grad=True"
    lines = [
        f"x = torch.tensor([1.0, 2.0, 3.0]{rg if input_requires_grad else ''})  # the input",
        f"w1 = torch.tensor([0.5, -1.0, 2.0]{rg})  # model 1",
        "h = w1 * x  # the intermediate",
    ]
    if retain_grad:
        lines.append("h.retain_grad()")
    lines.append(f"w2 = torch.tensor([2.0, 1.0, -1.0]{rg})  # model 2")
    if detach:
        lines += ["h_cut = h.detach()  # the cut", "y = (h_cut * w2).sum()"]
    else:
        lines.append("y = (h * w2).sum()  # no cut")
    lines.append("y.backward()")
    return "\n".join(lines)


@dataclass
class ExplorerResult:
    """One run of the graph explorer's program: its code, tensors, graph and state table."""

    code: str
    tensors: dict[str, torch.Tensor]
    graph: AutogradGraph
    table: Table


def explore_graph(
    detach: bool = False, input_requires_grad: bool = False, retain_grad: bool = False
) -> ExplorerResult:
    """Run the explorer's program for these toggles; graph of y and h, table after backward."""
    code = explorer_code(detach, input_requires_grad, retain_grad)
    namespace: dict[str, object] = {"torch": torch}
    exec(compile(code, "<graph explorer>", "exec"), namespace)
    order = ["x", "w1", "h", "h_cut", "w2", "y"]
    tensors = {name: namespace[name] for name in order if name in namespace}
    data = autograd_graph(tensors["y"], tensors["h"], params=tensors)  # type: ignore[arg-type]
    graph = AutogradGraph(data, title="graph of y (and of h)")
    return ExplorerResult(code, tensors, graph, tensor_state(**tensors))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Backward stepper: record the order autograd runs the nodes, then show any step
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackwardStep:
    """One backward function as the engine ran it."""

    index: int  # 1-based position in the order the engine ran the nodes
    node_id: str  # its id in the recorded GraphData
    name: str  # e.g. MulBackward0
    gradient_of: str  # the named tensor whose gradient it received ('' if unnamed)
    received: str  # the gradient it received, as describe_grad text
    freed_before: frozenset[str]  # function nodes whose saved tensors were freed before it ran


@dataclass
class BackwardRecord:
    """A backward pass recorded live: graph (with saved tensors), steps, what was freed."""

    data: GraphData
    steps: list[BackwardStep]
    freed_after: frozenset[str]
    leaf_grads: dict[str, str]  # node id of a leaf -> its .grad after backward (describe_grad)
    retain_graph: bool
    second_backward: str  # what a second backward() did: "runs: ..." or "raises ...", one line


def _function_nodes(data: GraphData) -> list[str]:
    return [n.id for n in data.nodes if n.kind == "function"]


def _saved_tensor_attrs(fn: object) -> list[str]:
    names = []
    for attr in sorted(a for a in dir(fn) if a.startswith("_saved_")):
        try:
            value = getattr(fn, attr)
        except RuntimeError:
            names.append(attr)  # already freed: it held a tensor
            continue
        if isinstance(value, torch.Tensor) or (
            isinstance(value, tuple) and any(isinstance(v, torch.Tensor) for v in value)
        ):
            names.append(attr)
    return names


def _is_freed(fn: object, attrs: list[str]) -> bool:
    if not attrs:
        return False
    try:
        getattr(fn, attrs[0])
    except RuntimeError:
        return True
    return False


def _tensor_names(data: GraphData, params: dict[str, torch.Tensor]) -> dict[str, str]:
    """Function node id -> the name of the tensor whose gradient that node receives."""
    names: dict[str, str] = {}
    for node_id, obj in data.objects.items():
        for name, t in params.items():
            if getattr(obj, "variable", None) is t or (t.grad_fn is not None and t.grad_fn is obj):
                names[node_id] = name
    return names


def _first_line(message: str) -> str:
    first = clean_message(message).split(". ")[0].splitlines()[0]
    return first if first.endswith(".") else first + "."


def record_backward(
    root: torch.Tensor,
    params: dict[str, torch.Tensor] | None = None,
    *,
    retain_graph: bool = False,
    gradient: torch.Tensor | None = None,
) -> BackwardRecord:
    """Run `root.backward()` once with a hook on every backward function and record what it did.

    A pre-hook on each node notes when the engine runs it and the gradient it receives; before
    each node runs (and after the pass) every node's saved tensors are probed for being freed.
    Afterwards a second backward() is tried, to show what `retain_graph` changed. `root` is
    used up: build a fresh graph for each call.
    """
    params = dict(params or {})
    data = autograd_graph(root, params=params, show_saved=True)
    functions = {node_id: data.objects[node_id] for node_id in _function_nodes(data)}
    saved = {node_id: _saved_tensor_attrs(fn) for node_id, fn in functions.items()}
    names = _tensor_names(data, params)

    def freed_now() -> frozenset[str]:
        return frozenset(i for i, fn in functions.items() if _is_freed(fn, saved[i]))

    steps: list[BackwardStep] = []

    def prehook_for(node_id: str) -> Callable[[tuple], None]:
        def prehook(grad_outputs: tuple) -> None:
            received = ", ".join(describe_grad(g) for g in grad_outputs)
            steps.append(
                BackwardStep(
                    index=len(steps) + 1,
                    node_id=node_id,
                    name=data.node(node_id).label,
                    gradient_of=names.get(node_id, ""),
                    received=received,
                    freed_before=freed_now(),
                )
            )

        return prehook

    handles = [fn.register_prehook(prehook_for(i)) for i, fn in functions.items()]  # type: ignore[attr-defined]
    try:
        root.backward(gradient, retain_graph=retain_graph)
    finally:
        for handle in handles:
            handle.remove()
    freed_after = freed_now()
    leaf_grads = {}
    for node in data.nodes:
        if node.kind == "leaf":
            leaf = data.objects[node.id]
            leaf_grads[node.id] = describe_grad(leaf.grad)  # type: ignore[attr-defined]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            root.backward(gradient)
        second = say("common", "stepper.second_runs")
    except RuntimeError as err:
        second = say("common", "stepper.second_raises", message=_first_line(str(err)))
    return BackwardRecord(data, steps, freed_after, leaf_grads, retain_graph, second)


@dataclass
class Frame:
    """What the stepper shows at one position: a picture and a table, with a caption."""

    position: int
    caption: str
    graph: AutogradGraph
    table: Table


def _frame_data(
    record: BackwardRecord, freed: frozenset[str], grads_known: dict[str, str]
) -> GraphData:
    """A copy of the recorded graph with freed saved tensors and known leaf gradients marked."""
    freed_saved = {e.dst for e in record.data.edges if e.style == "saved" and e.src in freed}
    nodes = []
    for n in record.data.nodes:
        if n.id in freed_saved:
            head = n.label.split("\n")[0]
            nodes.append(GraphNode(n.id, "freed", f"{head}\n[freed]", n.shape))
        elif n.id in grads_known:
            nodes.append(GraphNode(n.id, n.kind, f"{n.label}\ngrad = {grads_known[n.id]}", n.shape))
        else:
            nodes.append(n)
    return GraphData(nodes, list(record.data.edges), list(record.data.roots), record.data.objects)


def _leaf_of(record: BackwardRecord, function_id: str) -> str | None:
    for e in record.data.edges:
        if e.dst == function_id and record.data.node(e.src).kind == "leaf":
            return e.src
    return None


def backward_frame(record: BackwardRecord, position: int) -> Frame:
    """The stepper at `position`: 0 before backward, k while step k runs, N + 1 after the pass."""
    n = len(record.steps)
    if not 0 <= position <= n + 1:
        raise ValueError(f"position must be between 0 and {n + 1}, got {position}")
    done = {s.node_id for s in record.steps[: max(0, position - 1)]}
    if position == n + 1:
        done = {s.node_id for s in record.steps}
    current = record.steps[position - 1] if 1 <= position <= n else None
    grads_known = {}
    for step in record.steps:
        leaf = _leaf_of(record, step.node_id)
        if step.node_id in done and leaf is not None:
            grads_known[leaf] = record.leaf_grads[leaf]
    if position == 0:
        freed: frozenset[str] = frozenset()
        title = "before backward()"
        caption = say("common", "stepper.before", n=n)
    elif current is not None:
        freed = current.freed_before
        title = f"step {position} of {n}: {current.name}"
        target = (
            say("common", "stepper.gradient_of", name=current.gradient_of)
            if current.gradient_of
            else ""
        )
        caption = say(
            "common",
            "stepper.step",
            position=position,
            n=n,
            name=current.name,
            received=current.received,
            target=target,
        )
    else:
        freed = record.freed_after
        title = "after backward()"
        if record.retain_graph:
            what = say("common", "stepper.kept")
        elif freed:
            what = say("common", "stepper.freed")
        else:
            what = say("common", "stepper.nothing_saved")
        caption = say("common", "stepper.after", n=n, what=what, second=record.second_backward)
    data = _frame_data(record, freed, grads_known)
    highlight = [current.node_id] if current is not None else []
    not_run = [i for i in _function_nodes(record.data) if i not in done and i not in highlight]
    graph = AutogradGraph(
        data, highlight=highlight, dimmed=not_run if position > 0 else [], title=title
    )
    rows = []
    for step in record.steps:
        if step.node_id in done:
            status = "done"
        elif current is not None and step.node_id == current.node_id:
            status = "running"
        else:
            status = "waiting"
        rows.append(
            {
                "step": step.index,
                "backward function": step.name,
                "status": status,
                "gradient of": step.gradient_of or "-",
                "gradient received": step.received if status != "waiting" else "?",
            }
        )
    columns = ["step", "backward function", "status", "gradient of", "gradient received"]
    return Frame(position, caption, graph, Table(columns, rows))


def default_backward_example() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A small graph for the stepper: loss = ((w * x + b) ** 2).sum(), with exact gradients."""
    x = torch.tensor([1.0, 2.0, 3.0])
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = torch.tensor(1.0, requires_grad=True)
    h = w * x + b
    loss = (h**2).sum()
    return loss, {"x": x, "w": w, "b": b, "h": h, "loss": loss}


# --------------------------------------------------------------------------------------------
# Optimizer lab: the first post's split step with a chosen optimizer arrangement
# --------------------------------------------------------------------------------------------


OPTIMIZERS = ("SGD", "SGD with momentum", "Adam")
ARRANGEMENTS = ("one per model", "one for all three")
#: The post's CrossEntropyLoss call (every bias gradient is zero up to rounding noise, so which
#: biases Adam moves depends on the CPU), or the per-token loss it meant (real bias gradients).
LOSSES = ("the post's", "per token")
STAGES = ("loss.backward()", "f2.backward(ff2.grad)", "f1.backward(ff1.grad)")
MODELS = ("model1", "model2", "model3")
#: A parameter whose every gradient in the run stays below this is zero up to rounding noise (the
#: biases with the post's loss): whether and how far it moves depends on the CPU's kernels.
NOISE = 1e-6
_MAKE = {
    "SGD": "torch.optim.SGD({params}, lr={lr})",
    "SGD with momentum": "torch.optim.SGD({params}, lr={lr}, momentum=0.9)",
    "Adam": "torch.optim.Adam({params}, lr={lr})",
}


def _check_choices(optimizer: str, arrangement: str, loss: str) -> None:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    if arrangement not in ARRANGEMENTS:
        raise ValueError(
            f"unknown arrangement {arrangement!r}; choose one of {', '.join(ARRANGEMENTS)}"
        )
    _check_loss(loss)


def _check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")


def optimizer_code(
    optimizer: str, lr: float, set_to_none: bool, arrangement: str, loss: str = LOSSES[0]
) -> str:
    """The program the lab runs for one setting, line by line: the post's models and forward pass
    with both cuts, the optimizers, then each backward stage between `zero_grad()` and `step()`.

    Every line is one statement; `optimizer_run` executes exactly these lines (with `tokens`,
    `label`, `target`, `build_models` and `token_loss` given).
    """
    _check_choices(optimizer, arrangement, loss)
    make = _MAKE[optimizer]
    lr_text = f"{lr:g}"
    lines = [
        "models = build_models(seed=42)  # the post's three models",
        "f1 = models.model1(tokens)",
        "ff1 = f1.clone().detach().requires_grad_(True)  # cut 1",
        "f2 = models.model2(ff1)",
        "ff2 = f2.clone().detach().requires_grad_(True)  # cut 2",
    ]
    if loss == LOSSES[1]:
        lines += [
            "out = models.model3.layer(ff2)",
            "loss = token_loss(out, target)  # per token: target [[1, 1, 1, 1, 1]]",
        ]
    else:
        lines.append("out, loss = models.model3(ff2, label)  # the post's loss")
    if arrangement == ARRANGEMENTS[0]:
        params = "m.parameters()"
        lines.append(f"opts = [{make.format(params=params, lr=lr_text)} for m in models.as_list()]")
        picks = ["opts[2]", "opts[1]", "opts[0]"]
    else:
        lines += [
            "params = [p for m in models.as_list() for p in m.parameters()]",
            f"opt = {make.format(params='params', lr=lr_text)}  # one for all three",
        ]
        picks = ["opt"] * 3
    for pick, stage in zip(picks, STAGES, strict=True):
        lines += [f"{pick}.zero_grad(set_to_none={set_to_none})", stage, f"{pick}.step()"]
    return "\n".join(lines)


def _is_step(line: str) -> bool:
    return line.split("#", 1)[0].rstrip().endswith(".step()")


def _format_delta(value: float) -> str:
    return "0" if value == 0 else f"{value:.2g}"


@dataclass
class OptimizerRun:
    """One split step under a lab setting: the code that ran, snapshots, the diff, what each
    step() moved, and the largest gradient each parameter had when a step() read it."""

    optimizer: str
    lr: float
    set_to_none: bool
    arrangement: str
    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    diff: ParamDiff
    moves: list[list[bool]] = field(default_factory=list)  # per step() call, per model
    same_as_per_model: list[bool] = field(default_factory=list)  # per model
    loss: str = LOSSES[0]
    code: str = ""
    largest_grad: dict[str, float | None] = field(default_factory=dict)  # None: never had one

    def moves_table(self) -> Table:
        """Which models each optimizer.step() call moved, and the totals."""
        rows = []
        for stage, moved in zip(STAGES, self.moves, strict=True):
            row = {"step() after": stage}
            row.update({m: "moved" if x else "-" for m, x in zip(MODELS, moved, strict=True)})
            rows.append(row)
        totals = {"step() after": "times moved"}
        totals.update({m: str(sum(mv[i] for mv in self.moves)) for i, m in enumerate(MODELS)})
        same = {"step() after": "same as one optimizer per model?"}
        same.update(
            {m: "yes" if s else "NO" for m, s in zip(MODELS, self.same_as_per_model, strict=True)}
        )
        return Table(["step() after", *MODELS], rows + [totals, same])

    def noise(self) -> list[str]:
        """The parameters whose gradients were all below `NOISE` (zero or rounding noise)."""
        return [
            name
            for name, largest in self.largest_grad.items()
            if largest is not None and largest < NOISE
        ]

    def moved_table(self) -> Table:
        """Which parameters moved and by how much: elements moved and max |Δ| (2 digits).

        A parameter whose gradients were all below `NOISE` gets no numbers, only a note: its
        move is the CPU's rounding noise (Adam turns noise into steps of up to lr), so the table
        reads the same on every machine.
        """
        noise = set(self.noise())
        rows = []
        for change in self.diff.changes:
            if change.name in noise:
                rows.append(
                    {
                        "parameter": change.name,
                        "elements moved": "?",
                        "max |Δ|": "?",
                        "note": f"gradient < {NOISE:g}: rounding noise, moves depend on the CPU",
                    }
                )
                continue
            rows.append(
                {
                    "parameter": change.name,
                    "elements moved": f"{change.n_changed} / {change.numel}",
                    "max |Δ|": _format_delta(change.max_abs),
                    "note": "",
                }
            )
        known = [c for c in self.diff.changes if c.name not in noise]
        summary = say(
            "common", "tables.moved", moved=sum(c.changed for c in known), count=len(known)
        )
        if noise:
            summary += say("common", "tables.moved_noise", noise=len(noise))
        columns = ["parameter", "elements moved", "max |Δ|"] + (["note"] if noise else [])
        return Table(columns, rows, note=summary)

    def figure(self) -> Figure:
        """Heatmaps of what changed, per parameter (drawn once, then reused)."""
        cached = self.__dict__.get("_figure")
        if cached is None:
            title = (
                f"{self.optimizer}, lr={self.lr:g}, {self.arrangement}, "
                f"set_to_none={self.set_to_none}"
            )
            if self.loss != LOSSES[0]:
                title += f", {self.loss} loss"
            cached = diff_figure(self.diff, title=title)
            object.__setattr__(self, "_figure", cached)
        return cached


@dataclass
class _Ran:
    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    moves: list[list[bool]]
    largest_grad: dict[str, float | None]


def _run_lab_code(code: str) -> _Ran:
    """Execute the lab's program one line at a time; around each step() line, note which models
    it moved and the largest gradient each parameter had."""
    from helpers.split import POST_INPUT, POST_LABEL, TOKEN_TARGET, build_models, token_loss

    namespace: dict[str, object] = {
        "torch": torch,
        "build_models": build_models,
        "token_loss": token_loss,
        "tokens": torch.tensor(POST_INPUT),
        "label": torch.tensor(POST_LABEL),
        "target": torch.tensor(TOKEN_TARGET),
    }
    before: dict[str, torch.Tensor] | None = None
    moves: list[list[bool]] = []
    largest: dict[str, float | None] = {}
    for number, line in enumerate(code.splitlines(), start=1):
        models = namespace.get("models")
        stepping = _is_step(line) and models is not None
        if stepping:
            named = models.named_parameters()  # type: ignore[attr-defined]
            for name, p in named.items():
                if p.grad is not None:
                    g = float(p.grad.detach().abs().max())
                    largest[name] = max(g, largest.get(name) or 0.0)
                else:
                    largest.setdefault(name, None)
            was = snapshot(named)
        exec(compile(line, f"<optimizer lab, line {number}>", "exec"), namespace)
        models = namespace.get("models")
        if before is None and models is not None:
            before = snapshot(models.named_parameters())  # type: ignore[attr-defined]
        if stepping:
            now = models.named_parameters()  # type: ignore[union-attr]
            moves.append(
                [
                    any(not torch.equal(was[n], p) for n, p in now.items() if n.startswith(f"{m}."))
                    for m in MODELS
                ]
            )
    if before is None:
        raise ValueError("the lab's program never built `models`")
    after = snapshot(namespace["models"].named_parameters())  # type: ignore[attr-defined]
    return _Ran(before, after, moves, {n: largest.get(n) for n in after})


def optimizer_run(
    optimizer: str = "Adam",
    lr: float = 0.01,
    set_to_none: bool = True,
    arrangement: str = ARRANGEMENTS[0],
    loss: str = LOSSES[0],
) -> OptimizerRun:
    """Run the lab's program (`optimizer_code`) for this setting: one split step of the post's
    three models (seed 42), and the same step with one optimizer per model to compare with.

    `loss` is the post's CrossEntropyLoss call (`LOSSES[0]`, the default) or the per-token loss it
    meant (`LOSSES[1]`: `helpers.split.token_loss` with `TOKEN_TARGET`). The global random state
    is left as it was: the models are built inside `fork_rng`.
    """
    _check_choices(optimizer, arrangement, loss)
    code = optimizer_code(optimizer, lr, set_to_none, arrangement, loss)
    with torch.random.fork_rng(devices=[]):
        ran = _run_lab_code(code)
        reference = ran.after
        if arrangement != ARRANGEMENTS[0]:
            per_model = optimizer_code(optimizer, lr, set_to_none, ARRANGEMENTS[0], loss)
            reference = _run_lab_code(per_model).after
    same = [
        all(torch.equal(ran.after[k], reference[k]) for k in ran.after if k.startswith(f"{m}."))
        for m in MODELS
    ]
    return OptimizerRun(
        optimizer,
        lr,
        set_to_none,
        arrangement,
        ran.before,
        ran.after,
        param_diff(ran.before, ran.after),
        ran.moves,
        same,
        loss,
        code,
        ran.largest_grad,
    )
