"""What torch.compile does to autograd, caught in the act: the forward and backward graphs that
AOTAutograd traces ahead of time, the tensors it decides to save, and the graph breaks.

Notebook 09c compiles small functions with a backend that records the graphs and runs them
with PyTorch's ordinary kernels, as the `aot_eager` backends do:

    graphs = capture(f, x)                       # one forward + backward of f(x)
    graphs.saved                                 # what the forward returns for the backward
    graph_picture(graphs.forward, "forward", saved=graphs.saved)

`partition="default"` is AOTAutograd's default partitioner (the backend
`aot_eager_default_partitioner`), which keeps what the backward formulas ask for;
`partition="min-cut"` is the one `aot_eager` and inductor (torch's default backend) use, which
may recompute cheap operations in the backward instead of keeping their results. `compile_report`
counts graphs and graph breaks with torch's own `torch._dynamo.explain`, and keeps dynamo's log
lines instead of letting them reach stderr.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import graphviz

from helpers.doctor.watching import modes_off
from helpers.graph import COLOURS, NODE_ATTR, node_font, picture_bundle, title_font
from helpers.language import say
from helpers.naming import a_type

__all__ = [
    "PARTITIONS",
    "SURVIVAL_CASES",
    "CapturedGraphs",
    "GraphPicture",
    "autograd_survival",
    "capture",
    "compile_report",
    "graph_picture",
    "op_names",
    "saved_bytes",
]

PARTITIONS = ("default", "min-cut")


@dataclass
class CapturedGraphs:
    """The two graphs of one compiled function and what ran when."""

    forward: Any  # torch.fx.GraphModule
    backward: Any
    saved: list[str]  # names of the forward graph's values kept for the backward
    events: list[str] = field(default_factory=list)  # "forward compiled", "backward called", ...

    def timeline(self) -> str:
        """What ran when, in the learner's words: "forward compiled → backward called → ..."."""
        return " → ".join(say("common", f"compiled.{e.replace(' ', '_')}") for e in self.events)


def _partitioner(partition: str) -> Callable[..., Any]:
    from torch._functorch import partitioners

    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}, not {partition!r}")
    if partition == "default":
        return partitioners.default_partition
    return partitioners.min_cut_rematerialization_partition


def capture(
    fn: Callable[..., Any], *args: Any, partition: str = "default", outputs: int = 1
) -> CapturedGraphs:
    """Compile `fn`, call it on `args`, then run backward from its (scalar) result.

    Returns the forward and backward graphs AOTAutograd made, and the names of the forward
    graph's results beyond the first `outputs` (the values saved for the backward).
    """
    import torch
    import torch._dynamo as dynamo
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    if not callable(fn):
        raise TypeError(f"capture() needs a function to compile, not {a_type(fn)}")
    graphs: dict[str, Any] = {}
    events: list[str] = []

    def recorder(kind: str) -> Callable[..., Any]:
        def compiler(gm: Any, example_inputs: Any) -> Any:
            graphs[kind] = gm
            events.append(f"{kind} compiled")
            return make_boxed_func(gm.forward)

        return compiler

    backend = aot_autograd(
        fw_compiler=recorder("forward"),
        bw_compiler=recorder("backward"),
        partition_fn=_partitioner(partition),
    )
    dynamo.reset()  # no earlier compilation of fn is reused
    try:
        with modes_off():  # compiled as in a run without the course's watchers
            result = torch.compile(fn, backend=backend)(*args)
            if not (isinstance(result, torch.Tensor) and result.requires_grad):
                name = getattr(fn, "__name__", fn)
                raise RuntimeError(
                    f"{name} returned no tensor that requires grad, so there is no "
                    "forward/backward pair to capture: return a loss computed from an input that "
                    "requires grad"
                )
            events.append("backward called")
            result.backward()
    finally:
        dynamo.reset()
    if "forward" not in graphs or "backward" not in graphs:
        raise RuntimeError(
            f"{getattr(fn, '__name__', fn)} compiled to no forward/backward pair (a graph break "
            "or nothing to differentiate?): check it with compile_report()"
        )
    output = next(n for n in graphs["forward"].graph.nodes if n.op == "output")
    returned = output.args[0]
    saved = [str(v) for v in returned[outputs:]]
    return CapturedGraphs(graphs["forward"], graphs["backward"], saved, events)


def op_names(gm: Any) -> list[str]:
    """The operations a graph calls, in order, short: "sin", "mm", "tanh_backward"."""
    return [_short(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _short(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    return name.removeprefix("aten.").split(".")[0]


class GraphPicture(graphviz.Digraph):
    """An FX graph drawn in the course's style: inputs, operations, saved values, outputs.

    Displays as SVG with its text form beside it, or as text when `dot` is missing.
    """

    def __init__(self, gm: Any, title: str, saved: Sequence[str] = ()) -> None:
        super().__init__(
            name="fx_graph",  # pragma: no mutate (graphviz's name for the picture)
            node_attr={**NODE_ATTR, "fontname": node_font()},  # pragma: no mutate (by eye)
            graph_attr={  # spacing and font only: checked by looking at the picture
                "ranksep": "0.25",  # pragma: no mutate
                "nodesep": "0.2",  # pragma: no mutate
                "fontname": title_font(),  # pragma: no mutate
            },
        )
        self.attr(label=title, labelloc="t", fontsize="12")  # pragma: no mutate (by eye)
        self.lines = [f"{title}:"]
        saved = set(saved)
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                kind, label = "leaf", node.name
            elif node.op == "output":
                kind, label = "output", "output"
            else:
                kind, label = "function", _short(node.target)
            colour = COLOURS["saved"] if node.name in saved else COLOURS[kind]
            self.node(node.name, label, fillcolor=colour)
            inputs = [a.name for a in node.all_input_nodes]
            for source in inputs:
                self.edge(source, node.name)
            mark = "  " + say("common", "graph.saved_mark") if node.name in saved else ""
            args = f"({', '.join(inputs)})" if inputs else ""
            self.lines.append(f"  {node.name} = {label}{args}{mark}")

    def text(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include=None, exclude=None, **_) -> dict[str, str]:
        return picture_bundle(self, self.text())


def graph_picture(gm: Any, title: str, saved: Sequence[str] = ()) -> GraphPicture:
    """Draw an FX graph (a CapturedGraphs' forward or backward); `saved` values in orange."""
    return GraphPicture(gm, title, saved)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def compile_report(fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """torch's own account of compiling `fn(*args)`: graphs, graph breaks and their reasons
    (first line each), and dynamo's warnings, caught instead of printed."""
    import torch._dynamo as dynamo

    handler = _Lines()
    logger = logging.getLogger("torch._dynamo")  # where torch's own handler prints them
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [handler], False
    dynamo.reset()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with modes_off():  # as in a run without the course's watchers
                explained = dynamo.explain(fn)(*args)
    finally:
        dynamo.reset()
        logger.handlers, logger.propagate = handlers, propagate
    reasons = [str(b.reason).strip().splitlines()[0] for b in explained.break_reasons]
    return {
        "graphs": explained.graph_count,
        "graph breaks": max(explained.graph_break_count, 0),
        "reasons": reasons,
        "dynamo said": handler.lines + [str(w.message) for w in said],
    }


# What survives compilation: each case runs eagerly and compiled (aot_eager), and says what a
# learner would look at afterwards (an intermediate's .grad, a parameter's .grad, a hook's calls).


def _retain_grad(compiled: Callable) -> Any:
    import torch

    def f(x, w):
        h = x @ w
        h.retain_grad()
        return h.sum(), h

    x, w = torch.ones(2, 3), torch.ones(3, 2, requires_grad=True)
    loss, h = compiled(f)(x, w)
    loss.backward()
    return None if h.grad is None else h.grad.tolist(), f, (x, w)


def _pure_hook(compiled: Callable) -> Any:
    import torch

    def f(x, w):
        h = x @ w
        h.register_hook(lambda g: g * 2)
        return h.sum()

    x, w = torch.ones(2, 3), torch.ones(3, 2, requires_grad=True)
    compiled(f)(x, w).backward()
    return w.grad.tolist(), f, (x, torch.ones(3, 2, requires_grad=True))


def _appending_hook(compiled: Callable) -> Any:
    import torch

    calls: list[int] = []

    def f(x, w):
        h = x @ w
        h.register_hook(lambda g: calls.append(1))
        return h.sum()

    x, w = torch.ones(2, 3), torch.ones(3, 2, requires_grad=True)
    compiled(f)(x, w).backward()
    return (len(calls), w.grad.tolist()), f, (x, torch.ones(3, 2, requires_grad=True))


def _module_hook(compiled: Callable) -> Any:
    import torch

    layer = torch.nn.Linear(3, 2)
    calls: list[int] = []
    layer.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    x = torch.ones(2, 3, requires_grad=True)
    compiled(layer)(x).sum().backward()
    return len(calls), layer, (x,)


def _read_intermediate_grad(compiled: Callable) -> Any:
    import torch

    def f(x, w):
        h = x @ w
        return h.sum() + (0 if h.grad is None else 1)

    x, w = torch.ones(2, 3), torch.ones(3, 2, requires_grad=True)
    return float(compiled(f)(x, w)), f, (x, w)


def _new_leaf(compiled: Callable) -> Any:
    import torch

    def f(x):
        p = torch.ones(3, requires_grad=True)
        return (x * p).sum(), p

    x = torch.full((3,), 2.0)
    loss, p = compiled(f)(x)
    loss.backward()
    return None if p.grad is None else p.grad.tolist(), f, (x,)


#: The cases, by what a learner would call them.
SURVIVAL_CASES: dict[str, Callable] = {
    "retain_grad() on an intermediate": _retain_grad,
    "a tensor hook (no side effect)": _pure_hook,
    "a tensor hook that appends to a list": _appending_hook,
    "a module's full backward hook": _module_hook,
    "reading an intermediate's .grad": _read_intermediate_grad,
    "a tensor created with requires_grad=True inside": _new_leaf,
}


def autograd_survival(cases: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Each case eagerly and under torch.compile(backend="aot_eager"): torch's count of graphs
    and graph breaks (its first reason), and whether what the learner sees is what eager gives."""
    import torch
    import torch._dynamo as dynamo

    rows = []
    for name in cases or list(SURVIVAL_CASES):
        case = SURVIVAL_CASES[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # eager .grad reads of a non-leaf warn (01)
            eager, fn, args = case(lambda f: f)
            dynamo.reset()
            with modes_off():  # as in a run without the course's watchers
                compiled, _, _ = case(lambda f: torch.compile(f, backend="aot_eager"))
            dynamo.reset()
        report = compile_report(fn, *args)
        rows.append(
            {
                "case": name,
                "graphs": report["graphs"],
                "graph breaks": report["graph breaks"],
                "first reason": report["reasons"][0] if report["reasons"] else "-",
                "same as eager": compiled == eager,
            }
        )
    return rows


def saved_bytes(graphs: CapturedGraphs) -> int:
    """The bytes of the values the forward graph keeps for the backward (from their traced
    shapes and dtypes; an input kept counts too, as 05's counter counts it)."""
    values = {n.name: n for n in graphs.forward.graph.nodes}
    total = 0
    for name in graphs.saved:
        val = values[name].meta.get("val")
        if val is not None and hasattr(val, "numel"):
            total += int(val.numel()) * val.element_size()
    return total
