"""A backward pass recorded node by node, and the backward stepper's frames of it.

`record_backward` runs `root.backward()` once with a pre-hook on every backward function: it
notes the order the engine runs the nodes, the gradient each one receives, and which saved
tensors were already freed at each step; afterwards it tries a second backward() to show what
`retain_graph` changed. `backward_frame` turns the record into what the stepper shows at one
position: a graph (the running node highlighted, freed saved tensors and known leaf gradients
marked) and a table of the steps. Notebooks and exercises use the record directly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from helpers.checks import clean_message
from helpers.display import Table
from helpers.graph import AutogradGraph, GraphData, GraphNode, autograd_graph, freed_label
from helpers.language import say
from helpers.state import describe_grad

__all__ = [
    "BackwardRecord",
    "BackwardStep",
    "Frame",
    "backward_frame",
    "default_backward_example",
    "record_backward",
]


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
            nodes.append(GraphNode(n.id, "freed", freed_label(head), n.shape))
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
        title = say("common", "graph.before")
        caption = say("common", "stepper.before", n=n)
    elif current is not None:
        freed = current.freed_before
        title = say("common", "graph.step", position=position, n=n, name=current.name)
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
        title = say("common", "graph.after")
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
