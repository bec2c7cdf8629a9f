"""The pictures of a split step (notebook 06): the three stage graphs side by side, each cut's
hand-off drawn between them (activations forward, gradients back), and the joint graph beside
them with its cuts marked. `split_graphs(result, models)` draws what `helpers.split.run_split`
ran; its text form is what nbval compares and what shows without `dot`.
"""

from __future__ import annotations

from collections.abc import Mapping

import graphviz
import torch
from torch import nn

from helpers.graph import (
    COLOURS,
    NODE_ATTR,
    AutogradGraph,
    GraphData,
    GraphEdge,
    autograd_graph,
    node_font,
    picture_bundle,
    title_font,
)
from helpers.language import say
from helpers.split import SplitModels, SplitResult

__all__ = ["SplitGraphs", "split_graphs"]


def _clean(data: GraphData) -> GraphData:
    """The graph without view-base nodes and with each edge once (a view root repeats its tree)."""
    keep = [n for n in data.nodes if n.kind != "view_base"]
    ids = {n.id for n in keep}
    edges: list[GraphEdge] = []
    for e in data.edges:
        if e.src in ids and e.dst in ids and e not in edges:
            edges.append(e)
    objects = {k: v for k, v in data.objects.items() if k in ids}
    return GraphData(keep, edges, [r for r in data.roots if r in ids], objects)


def _stage_data(result: SplitResult, models: SplitModels) -> list[tuple[str, GraphData, dict]]:
    def graph(root: torch.Tensor, model: nn.Module, **tensors: torch.Tensor) -> GraphData:
        return _clean(autograd_graph(root, params={**dict(model.named_parameters()), **tensors}))

    return [
        (say("common", "split_graphs.stage_1"), graph(result.f1, models.model1, f1=result.f1), {}),
        (
            say("common", "split_graphs.stage_2"),
            graph(result.f2, models.model2, ff1=result.ff1, f2=result.f2),
            {"ff1": result.ff1},
        ),
        (
            say("common", "split_graphs.stage_3"),
            graph(result.loss, models.model3, ff2=result.ff2, loss=result.loss),
            {"ff2": result.ff2},
        ),
    ]


def _find(data: GraphData, tensor: torch.Tensor) -> str | None:
    for node_id, obj in data.objects.items():
        if obj is tensor:
            return node_id
    return None


class SplitGraphs:
    """The three stage graphs of a split step side by side (plus the joint graph, if given).

    Dashed blue arrows are the activations sent forward across each cut; red arrows the gradients
    sent back. Displays as SVG with the stage graphs' text forms as text/plain (without `dot`: the
    text forms and what to install, as `show_graph` does); `.dot` is the graphviz.Digraph.
    """

    def __init__(
        self,
        result: SplitResult,
        models: SplitModels,
        joint: SplitResult | None = None,
        joint_models: SplitModels | None = None,
    ) -> None:
        self.dot = graphviz.Digraph(
            name="split_graphs",
            node_attr={**NODE_ATTR, "fontname": node_font()},
            # size: at most 8.4 inches wide, so the picture fits a notebook column
            graph_attr={
                "ranksep": "0.2",
                "nodesep": "0.12",
                "fontname": title_font(),
                "size": "8.4,40",
            },
        )
        self.stages = _stage_data(result, models)
        ids: dict[str, str] = {}
        for k, (title, data, received) in enumerate(self.stages, start=1):
            self._cluster(f"s{k}", title, data, "lightyellow")
            ids[f"stage{k}"] = f"s{k}_{data.roots[0]}"
            for name, t in received.items():
                found = _find(data, t)
                if found is not None:
                    ids[name] = f"s{k}_{found}"
        for k, (sent, received) in enumerate((("f1", "ff1"), ("f2", "ff2")), start=1):
            if received not in ids:
                continue
            forward = "  ↓ " + say("common", "split_graphs.values", name=sent)
            backward = f"  ↑ {received}.grad"
            self.dot.edge(
                ids[f"stage{k}"],
                ids[received],
                style="dashed",
                color="blue:red",
                dir="both",
                arrowtail="normal",
                label=f'<<font color="blue">{forward}</font><br/>'
                f'<font color="red">{backward}</font>>',
                fontsize="9",
                fontname=title_font(),
                minlen="2",
            )
        self.joint: GraphData | None = None
        if joint is not None:
            named = (joint_models or models).named_parameters()
            self.joint = _clean(autograd_graph(joint.loss, params={**named, "loss": joint.loss}))
            marks = {}
            for name, t in (("f1", joint.f1), ("f2", joint.f2)):
                found = _find(self.joint, t.grad_fn) if t.grad_fn is not None else None
                if found is not None:
                    marks[found] = say("common", "split_graphs.cut", name=name, k=name[1])
            self._cluster("j", say("common", "split_graphs.joint"), self.joint, "white", marks)

    def _cluster(
        self,
        prefix: str,
        title: str,
        data: GraphData,
        colour: str,
        marks: Mapping[str, str] | None = None,
    ) -> None:
        marks = marks or {}
        with self.dot.subgraph(name=f"cluster_{prefix}") as c:
            c.attr(
                label=title,
                labelloc="t",
                labeljust="l",
                fontsize="12",
                style="rounded,filled",
                fillcolor=colour,
                color="grey60",
            )
            for n in data.nodes:
                attrs = {"fillcolor": COLOURS[n.kind]}
                label = n.label
                if n.id in marks:
                    attrs.update(color="red", penwidth="2")
                    label = f"{label}\n{marks[n.id]}"
                c.node(f"{prefix}_{n.id}", label, **attrs)
            for e in data.edges:
                if e.style == "flow":
                    c.edge(f"{prefix}_{e.src}", f"{prefix}_{e.dst}")

    def text(self) -> str:
        """The text form of each graph, stage by stage (then the joint one)."""
        parts = [f"{title}\n{AutogradGraph(data).text()}" for title, data, _ in self.stages]
        if self.joint is not None:
            parts.append(
                say("common", "split_graphs.joint_short") + "\n" + AutogradGraph(self.joint).text()
            )
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include=None, exclude=None, **_) -> dict[str, str]:
        return picture_bundle(self.dot, self.text())


def split_graphs(
    result: SplitResult,
    models: SplitModels,
    joint: SplitResult | None = None,
    joint_models: SplitModels | None = None,
) -> SplitGraphs:
    """Draw the three stage graphs of a split step side by side, and the joint graph if given."""
    return SplitGraphs(result, models, joint, joint_models)
