"""The autograd graph behind tensors: computed as plain data, drawn with graphviz.

`autograd_graph` walks `grad_fn.next_functions` from the given tensors and returns nodes and edges
with deterministic ids (n0, n1, ... in the order they are first met), so the same code always gives
the same DOT text. `show_graph` draws that data with torchviz's colours and a legend, and shows a
plain-text rendering (plus what to install) when the `dot` program is missing.

Both walk any tensor of torch's shape, not only torch's own (notebook 05b draws the learner's
engine beside torch): an object with `grad_fn` and `requires_grad` (and an array in `.data` or a
`.shape`), whose grad_fn, when not None, has `next_functions` ((node, index) pairs) and `name()`,
and a leaf's AccumulateGrad node its `variable`. Such a node is labelled by its `name()`, without
a namespace ("torch::autograd::AccumulateGrad" is AccumulateGrad), as torch's are by their type.
"""

from __future__ import annotations

import functools
import html
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field

import graphviz
import torch

from helpers.language import language, phrase, say
from helpers.naming import a_type, named_tensors
from helpers.shapes import shape_text

__all__ = [
    "AutogradGraph",
    "GraphData",
    "GraphEdge",
    "GraphNode",
    "autograd_graph",
    "dot_available",
    "missing_dot_message",
    "picture_bundle",
    "show_graph",
    "svg_titled",
]

SAVED_PREFIX = "_saved_"
#: What an object needs to be drawn as a tensor (torch's, or an engine's of your own), and what its
#: grad_fn needs to be drawn as a backward function: the attributes torch's have.
TENSOR_SHAPE = ("grad_fn", "requires_grad")
NODE_SHAPE = ("next_functions", "name")
MAX_TEXT_LINES = 120
MAX_TEXT_DEPTH = 24

#: Fill colours, as in torchviz, plus the two kinds torchviz cannot show (freed, no graph).
COLOURS = {
    "output": "darkolivegreen1",
    "function": "lightgrey",
    "leaf": "lightblue",
    "saved": "orange",
    "freed": "white",
    "view_base": "darkolivegreen3",
}
#: How every node is drawn (torchviz's look): filled monospace boxes.
NODE_ATTR = {
    "style": "filled",
    "shape": "box",
    "fontsize": "10",
    "height": "0.2",
    "fontname": "monospace",
}
#: The legend's kinds, in the order it lists them; `legend_text` says each in the learner's
#: language (helpers/text/*/common.toml, [graph]).
LEGEND = ("output", "function", "leaf", "saved", "freed", "view_base")
#: The graph's font in a Chinese edition: the same monospace face for Latin, then a Simplified
#: Chinese one, so that a browser never draws the Chinese words in a Japanese face.
CHINESE_NODE_FONT = "DejaVu Sans Mono,Noto Sans Mono CJK SC,monospace"
#: The title's font: sans-serif, and in a Chinese edition a Simplified Chinese face first in line.
TITLE_FONT = "sans-serif"
CHINESE_TITLE_FONT = "DejaVu Sans,Noto Sans CJK SC,sans-serif"


def kind_name(kind: str) -> str:
    """A kind of node as the graph's text form names it (function, leaf, ...), in the learner's
    language."""
    return say("common", f"graph.kind_{kind}")


def legend_text(kind: str) -> str:
    """What the legend says of a kind of node, in the learner's language."""
    return say("common", f"graph.legend_{kind}")


def freed_label(name: str) -> str:
    """A freed saved tensor's node label: its name, then "[freed]" in the learner's language."""
    return f"{name}\n{say('common', 'graph.freed')}"


def node_font() -> str:
    """The nodes' font: NODE_ATTR's monospace, and a Chinese face first in line in Chinese."""
    return CHINESE_NODE_FONT if language() == "zh" else NODE_ATTR["fontname"]


def title_font() -> str:
    """The title's font (the stepper's titles speak the edition's language)."""
    return CHINESE_TITLE_FONT if language() == "zh" else TITLE_FONT


@dataclass(frozen=True)
class GraphNode:
    """One node: a tensor (output, leaf, saved, view base) or a backward function."""

    id: str
    kind: str
    label: str
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class GraphEdge:
    """An edge in forward direction (input to consumer); `style` is 'flow', 'saved' or 'view'."""

    src: str
    dst: str
    style: str = "flow"


@dataclass
class GraphData:
    """Nodes and edges of an autograd graph, with the ids of the root tensors."""

    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    #: the torch objects behind each node id (tensors and grad_fn nodes), for tools that step
    #: through the graph; not part of equality.
    objects: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def node(self, node_id: str) -> GraphNode:
        """The node with this id."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id!r} in this graph")

    def kinds(self) -> dict[str, int]:
        """How many nodes of each kind the graph has."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.kind] = counts.get(n.kind, 0) + 1
        return counts

    def function_names(self) -> list[str]:
        """Names of the backward functions, in the order they were met."""
        return [n.label for n in self.nodes if n.kind == "function"]


def _lacks(obj: object, names: tuple[str, ...]) -> list[str]:
    """The attributes of `names` that `obj` does not have."""
    return [name for name in names if not hasattr(obj, name)]


def _is_tensor(obj: object) -> bool:
    """Whether `obj` is drawn as a tensor: torch's, or one of torch's shape (`TENSOR_SHAPE`)."""
    return isinstance(obj, torch.Tensor) or not _lacks(obj, TENSOR_SHAPE)


def _shape(t: object) -> tuple[int, ...] | None:
    """A tensor's shape: torch's, or an engine tensor's `.shape` or `.data.shape`; None if none."""
    if isinstance(t, torch.Tensor):
        return tuple(t.shape)
    for holder in (t, getattr(t, "data", None)):
        shape = getattr(holder, "shape", None)
        if shape is not None:
            return tuple(int(size) for size in shape)
    return None


def _function_label(fn: object) -> str:
    """A backward function's label: torch's by its type, an engine's by its name() without a
    namespace; an object without `NODE_SHAPE` is refused, saying what it lacks."""
    if isinstance(fn, torch.autograd.graph.Node):
        return type(fn).__name__
    missing = _lacks(fn, NODE_SHAPE)
    if missing:
        raise TypeError(
            f"a grad_fn in this graph is {a_type(fn)} without {' and '.join(missing)}: a "
            "backward function needs next_functions, a tuple of (node, index) pairs, and "
            "name(), as torch's have"
        )
    return str(fn.name()).rsplit("::", 1)[-1]


def _name_map(params: object) -> dict[int, str]:
    """Map id(tensor) -> name, from any form `helpers.naming` accepts (or a dict of tensors of
    an engine's own, `TENSOR_SHAPE`)."""
    if params is None:
        return {}
    if isinstance(params, dict) and params and all(
        _is_tensor(v) and not isinstance(v, torch.Tensor) for v in params.values()
    ):
        return {id(t): str(name) for name, t in params.items()}
    named = named_tensors(params, "params", example=PARAMS_EXAMPLE)
    return {id(t): name for name, t in named.items()}


PARAMS_EXAMPLE = "e.g. show_graph(loss, params=model) or params={'w': w}"


class _Builder:
    def __init__(self, names: dict[int, str], show_saved: bool) -> None:
        self.names = names
        self.show_saved = show_saved
        self.data = GraphData()
        self._ids: dict[int, str] = {}
        self._keep: list[object] = []  # keeps every visited object alive, so ids stay unique
        self._walked: set[int] = set()  # backward functions already expanded, across all roots

    def id_of(self, obj: object) -> str:
        key = id(obj)
        if key not in self._ids:
            self._ids[key] = f"n{len(self._ids)}"
            self._keep.append(obj)
        return self._ids[key]

    def add_node(self, obj: object, kind: str, label: str, shape=None) -> str:
        node_id = self.id_of(obj)
        if node_id not in self.data.objects:
            self.data.objects[node_id] = obj
            self.data.nodes.append(GraphNode(node_id, kind, label, shape))
        return node_id

    def tensor_label(self, t: torch.Tensor, name: str | None = None) -> str:
        shown = self.names.get(id(t), "")
        if name:
            shown = f"{name} = {shown}" if shown else name
        sizes = _shape(t)
        if sizes is None:  # an engine's tensor that holds no shape
            return shown
        shape = phrase(None, shape_text(sizes))  # "scalar" in the learner's language
        return f"{shown}\n{shape}" if shown else shape

    def add_root(self, t: torch.Tensor) -> None:
        if id(t) in self._ids:
            return
        label = self.tensor_label(t)
        if t.grad_fn is None:
            note = say("common", "graph.root_leaf" if t.requires_grad else "graph.root_no_graph")
            label = f"{label}\n[{note}]"
        root = self.add_node(t, "output", label, _shape(t))
        self.data.roots.append(root)
        if t.grad_fn is not None:
            self.add_function_tree(t.grad_fn)
            self.data.edges.append(GraphEdge(self.id_of(t.grad_fn), root))
        if isinstance(t, torch.Tensor) and t._is_view() and t._base is not None:
            self.add_view_base(t._base, root)

    def add_view_base(self, base: torch.Tensor, view_id: str) -> None:
        known = id(base) in self._ids
        base_id = self.add_node(base, "view_base", self.tensor_label(base), tuple(base.shape))
        self.data.edges.append(GraphEdge(base_id, view_id, "view"))
        if not known and base.grad_fn is not None:
            self.add_function_tree(base.grad_fn)
            self.data.edges.append(GraphEdge(self.id_of(base.grad_fn), base_id))

    def add_function_tree(self, root_fn: object) -> None:
        # Iterative depth-first walk: long chains must not hit Python's recursion limit.
        stack = [root_fn]
        while stack:
            fn = stack.pop()
            if id(fn) in self._walked:
                continue
            self._walked.add(id(fn))
            fn_id = self.add_node(fn, "function", _function_label(fn))
            if self.show_saved:
                self.add_saved(fn, fn_id)
            variable = getattr(fn, "variable", None)
            if variable is not None and _is_tensor(variable):
                label = self.tensor_label(variable)
                var_id = self.add_node(variable, "leaf", label, _shape(variable))
                self.data.edges.append(GraphEdge(var_id, fn_id))
            children = [u for u, _ in getattr(fn, "next_functions", ()) if u is not None]
            for child in children:
                self.data.edges.append(GraphEdge(self.id_of(child), fn_id))
            stack.extend(reversed(children))

    def add_saved(self, fn: object, fn_id: str) -> None:
        for attr in sorted(a for a in dir(fn) if a.startswith(SAVED_PREFIX)):
            name = attr[len(SAVED_PREFIX) :]
            try:
                value = getattr(fn, attr)
            except RuntimeError:  # freed by a backward() without retain_graph
                marker = ("freed", fn_id, name)
                node_id = self.add_node(marker, "freed", freed_label(name))
                self.data.edges.append(GraphEdge(fn_id, node_id, "saved"))
                continue
            items = [(name, value)] if isinstance(value, torch.Tensor) else []
            if isinstance(value, tuple):
                items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
            for item_name, tensor in items:
                if isinstance(tensor, torch.Tensor):
                    marker = ("saved", fn_id, item_name)  # one node per saved slot
                    node_id = self.add_node(
                        marker, "saved", self.tensor_label(tensor, item_name), tuple(tensor.shape)
                    )
                    self.data.objects[node_id] = tensor
                    self.data.edges.append(GraphEdge(fn_id, node_id, "saved"))


def _check_roots(roots: tuple[object, ...], func: str) -> list[torch.Tensor]:
    """The tensors to draw, flattened: torch's, or of torch's shape (`TENSOR_SHAPE`, and a
    grad_fn of `NODE_SHAPE`); anything else is refused, saying what it lacks."""
    if not roots:
        raise TypeError(f"{func}() needs at least one tensor, e.g. {func}(loss)")
    flat: list[object] = []
    for r in roots:
        flat.extend(r if isinstance(r, (tuple, list)) else [r])
    for i, r in enumerate(flat, start=1):
        if isinstance(r, torch.Tensor):
            continue
        shown = repr(r)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        missing = _lacks(r, TENSOR_SHAPE)
        if len(missing) == len(TENSOR_SHAPE):  # nothing of a tensor
            raise TypeError(
                f"{func}() expects tensors; argument {i} is {a_type(r)} ({shown}). "
                f"Pass the tensor whose graph you want, e.g. {func}(loss)"
            )
        if missing:
            raise TypeError(
                f"{func}() expects tensors; argument {i} is {a_type(r)} ({shown}) without "
                f"{missing[0]}: a tensor of your own engine needs grad_fn and requires_grad, as "
                "torch's has"
            )
        if r.grad_fn is not None:  # type: ignore[attr-defined]
            _function_label(r.grad_fn)  # type: ignore[attr-defined]
    return flat  # type: ignore[return-value]


def autograd_graph(
    *roots: torch.Tensor, params: object = None, show_saved: bool = False
) -> GraphData:
    """The autograd graph of `roots` as nodes and edges with deterministic ids."""
    tensors = _check_roots(roots, "autograd_graph")
    builder = _Builder(_name_map(params), show_saved)
    for t in tensors:
        builder.add_root(t)
    builder.data.nodes.sort(key=lambda n: int(n.id[1:]))  # n0, n1, ...: the DOT text reads in order
    return builder.data


@functools.cache
def dot_available() -> bool:
    """True when graphviz's `dot` program is on PATH (needed to draw pictures)."""
    return shutil.which("dot") is not None


def missing_dot_message() -> str:
    """What to install when `dot` is missing."""
    return (
        "Graph picture unavailable: graphviz's `dot` program is not installed, so here is the "
        "graph as text.\nInstall it, then restart the kernel:\n"
        "  Debian/Ubuntu: sudo apt-get install graphviz\n"
        "  macOS:         brew install graphviz\n"
        "  conda:         conda install -c conda-forge python-graphviz"
    )


def picture_bundle(picture: graphviz.Digraph, text: str) -> dict[str, str]:
    """What Jupyter shows for a graph picture: SVG with `text` beside it, or `text` alone.

    The one place that decides between picture and text: without `dot`, `text` comes after what to
    install (`missing_dot_message`); if `dot` fails on this graph, after the error's first line.
    """
    advice = missing_dot_message() + "\n\n" + text
    if not dot_available():
        return {"text/plain": advice}
    try:
        svg = picture.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:  # `dot` went missing after it was found
        return {"text/plain": advice}
    except graphviz.CalledProcessError as err:
        first = str(err).splitlines()[0]  # never empty: "Command '...' returned non-zero ..."
        return {"text/plain": f"Graph picture failed ({first}); as text:\n\n{text}"}
    return {"image/svg+xml": svg_titled(svg, text), "text/plain": text}


_SVG_ROOT = re.compile(r"<svg\b[^>]*>")


def svg_titled(svg: str, text: str) -> str:
    """The SVG with `text` as its title (its first child): what the picture shows, for a screen
    reader or a viewer's tooltip wherever the SVG is opened on its own (the site's pictures take
    the same text as their `alt`)."""
    root = _SVG_ROOT.search(svg)
    if root is None:
        return svg
    title = f"<title>{html.escape(text.strip(), quote=False)}</title>"
    return svg[: root.end()] + title + svg[root.end() :]


def graph_text(data: GraphData) -> str:
    """A stable, indented text rendering of the graph, from each root down to the leaves."""
    kinds = say("common", "graph.text_kind_separator").join(
        say("common", "graph.text_kind_count", count=v, kind=kind_name(k))
        for k, v in sorted(data.kinds().items())
    )
    lines = [
        say(
            "common",
            "graph.text_summary",
            nodes=len(data.nodes),
            edges=len(data.edges),
            kinds=kinds,
        )
    ]
    saved, view_of = say("common", "graph.text_saved"), say("common", "graph.text_view_of")
    children: dict[str, list[tuple[str, str]]] = {}
    for e in data.edges:
        if e.style == "saved":
            children.setdefault(e.src, []).append((e.dst, f"{saved} "))
        else:
            children.setdefault(e.dst, []).append(
                (e.src, f"{view_of} " if e.style == "view" else "")
            )
    labels = {n.id: (n.label.replace("\n", " "), kind_name(n.kind)) for n in data.nodes}
    shown: set[str] = set()
    # Iterative depth-first walk (deep graphs must not hit the recursion limit); indentation stops
    # growing after MAX_TEXT_DEPTH levels and the text stops after MAX_TEXT_LINES lines.
    stack = [(root, "", "", "") for root in reversed(data.roots)]
    while stack:
        if len(lines) > MAX_TEXT_LINES:
            lines.append(say("common", "graph.text_more", count=len(data.nodes) - len(shown)))
            break
        node_id, prefix, branch, how = stack.pop()
        label, kind = labels[node_id]
        again = node_id in shown and bool(children.get(node_id))
        tail = "  " + say("common", "graph.text_again") if again else ""
        lines.append(f"{prefix}{branch}{how}{label}  <{kind}>{tail}")
        if again:
            continue
        shown.add(node_id)
        kids = children.get(node_id, [])
        inner = prefix
        if branch and len(prefix) < 4 * MAX_TEXT_DEPTH:
            inner = prefix + ("    " if branch == "└── " else "│   ")
        for i in reversed(range(len(kids))):
            kid, kid_how = kids[i]
            stack.append((kid, inner, "└── " if i == len(kids) - 1 else "├── ", kid_how))
    return "\n".join(lines)


class AutogradGraph(graphviz.Digraph):
    """A graphviz Digraph of an autograd graph that knows its data and its text form.

    Displays as SVG in Jupyter (with a stable text/plain form beside it), or as text plus install
    instructions when `dot` is missing.
    """

    def __init__(
        self,
        data: GraphData,
        *,
        legend: bool = True,
        title: str | None = None,
        highlight: Iterable[str] = (),
        dimmed: Iterable[str] = (),
    ) -> None:
        super().__init__(
            name="autograd_graph",
            node_attr={**NODE_ATTR, "fontname": node_font()},
            graph_attr={  # spacing and font only: checked by looking at the picture
                "ranksep": "0.25",  # pragma: no mutate
                "nodesep": "0.2",  # pragma: no mutate
                "fontname": title_font(),
            },
        )
        self.data = data
        highlight, dimmed = set(highlight), set(dimmed)
        if title:
            self.attr(label=title, labelloc="t", fontsize="12")
        for n in data.nodes:
            attrs = {"fillcolor": COLOURS[n.kind]}
            if n.kind == "freed":
                attrs["style"] = "dashed"
                attrs["fontcolor"] = "grey40"  # pragma: no mutate (a shade of grey, by eye)
            if n.id in highlight:
                attrs["penwidth"] = "3"  # pragma: no mutate (border width, by eye)
                attrs["color"] = "red"  # pragma: no mutate (border colour, by eye)
            if n.id in dimmed:
                attrs["style"] = "filled,dashed"
                attrs["fontcolor"] = "grey50"  # pragma: no mutate (a shade of grey, by eye)
            self.node(n.id, n.label, **attrs)
        for e in data.edges:
            if e.style == "saved":
                self.edge(e.src, e.dst, dir="none", color="darkorange")
            elif e.style == "view":
                self.edge(e.src, e.dst, style="dotted")
            else:
                self.edge(e.src, e.dst)
        if legend:
            self._add_legend()

    def _add_legend(self) -> None:
        # One compact node holding a small table: a colour swatch and a description per kind.
        kinds = [k for k in LEGEND if k in self.data.kinds()]
        rows = ""
        for kind in kinds:
            dashed = ' STYLE="dashed"' if kind == "freed" else ""
            rows += (
                f'<TR><TD BGCOLOR="{COLOURS[kind]}" WIDTH="14"{dashed}></TD>'
                f'<TD ALIGN="LEFT" BORDER="0">{legend_text(kind)}</TD></TR>'
            )
        table = f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="2">{rows}</TABLE>>'
        # the node's name is the picture's tooltip over the legend (its <title> in the SVG)
        self.node(say("common", "graph.legend"), table, shape="plaintext", style="", fontsize="9")

    def text(self) -> str:
        """The graph as indented text (what nbval compares, and the fallback without `dot`)."""
        return graph_text(self.data)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include=None, exclude=None, **_) -> dict[str, str]:
        return picture_bundle(self, self.text())


def show_graph(
    *roots: torch.Tensor,
    params: object = None,
    show_saved: bool = False,
    legend: bool = True,
    title: str | None = None,
) -> AutogradGraph:
    """Draw the autograd graph of one or more tensors (names from `params`: a model, a dict of
    name -> tensor, or model.named_parameters(); see `helpers.naming`)."""
    _check_roots(roots, "show_graph")  # its own name in the message, not autograd_graph's
    return AutogradGraph(
        autograd_graph(*roots, params=params, show_saved=show_saved), legend=legend, title=title
    )
