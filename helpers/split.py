"""Split learning with three models: the first post's program, as functions notebooks 06-07 share.

Model 1 (embedding + linear) belongs to the "client" that holds the input; model 2 to a middle
party; model 3 (linear + loss) to the label holder. Forward passes activations across each cut,
backward passes gradients back: `loss.backward()`, then `f2.backward(ff2.grad)`, then
`f1.backward(ff1.grad)`.

`run_split` is the same step with knobs for the usual mistakes (a cut without `requires_grad_()`,
another backward order, a skipped `zero_grad()`, the wrong tensor's gradient handed back);
`compare_models` and `compare_tensors` say, as a table, whether two runs agree; `model_table`
lists the models and who holds them, and `arrangement_table` which models each optimizer
arrangement moved.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from helpers.display import Table
from helpers.language import phrase, say
from helpers.naming import a_type
from helpers.shapes import shape_text

__all__ = [
    "MLP1",
    "MLP2L",
    "PARTIES",
    "POST_INPUT",
    "POST_LABEL",
    "POST_SEED",
    "SPLIT_ORDER",
    "TOKEN_TARGET",
    "MLPem0",
    "SplitModels",
    "SplitResult",
    "arrangement_table",
    "build_models",
    "changed_models",
    "clone_models",
    "compare_models",
    "compare_tensors",
    "cut",
    "joint_step",
    "load_parameters",
    "make_one_optimizer",
    "make_optimizers",
    "model_table",
    "models_with_grad",
    "post_tensors",
    "run_split",
    "token_loss",
    "token_tensors",
]

POST_SEED = 42
#: Held while models are built: torch's global generator is one per process, shared by threads.
_GLOBAL_GENERATOR = threading.Lock()
POST_INPUT = [[2, 1, 3, 0, 9]]
#: The post's label: called one-hot there, but CrossEntropyLoss reads it as 3 class indices along
#: the output's dim 1 (see notebook 06).
POST_LABEL = [[0, 1, 0]]
#: The label the post meant: each of the 5 tokens has the one-hot label [0, 1, 0], i.e. class 1.
TOKEN_TARGET = [[1, 1, 1, 1, 1]]
#: The order of the backward stages in the split flow: the label holder first, the client last.
SPLIT_ORDER = (3, 2, 1)
#: Who holds model 1, 2 and 3 in the post's split-learning setting.
PARTIES = ("client (holds the input)", "middle party", "label holder (holds the label)")


class MLPem0(nn.Module):
    """Model 1 (the client's): token ids -> Embedding -> Linear."""

    def __init__(self, num_embeddings: int = 10, embedding_dim: int = 6, model_dim: int = 6):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)
        self.layer = nn.Linear(embedding_dim, model_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.layer(self.embed(tokens))


class MLP1(nn.Module):
    """Model 2 (the middle party's): one Linear layer."""

    def __init__(self, in_dim: int = 6, model_dim: int = 6):
        super().__init__()
        self.layer = nn.Linear(in_dim, model_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layer(features)


class MLP2L(nn.Module):
    """Model 3 (the label holder's): Linear, then CrossEntropyLoss exactly as the post calls it."""

    def __init__(self, in_dim: int = 6, num_classes: int = 3):
        super().__init__()
        self.layer = nn.Linear(in_dim, num_classes)

    def forward(self, features: torch.Tensor, label: torch.Tensor):
        out = self.layer(features)
        loss = nn.CrossEntropyLoss()(out, label)
        return out, loss


@dataclass
class SplitModels:
    """The three models of the post."""

    model1: MLPem0
    model2: MLP1
    model3: MLP2L

    def as_list(self) -> list[nn.Module]:
        """[model1, model2, model3]."""
        return [self.model1, self.model2, self.model3]

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """All parameters, named model1.embed.weight, model2.layer.bias, ..."""
        return {
            f"model{i}.{name}": p
            for i, m in enumerate(self.as_list(), start=1)
            for name, p in m.named_parameters()
        }


def build_models(
    seed: int = POST_SEED,
    dims: tuple[int, int, int, int] = (10, 6, 6, 3),
    *,
    embedding_dim: int | None = None,
) -> SplitModels:
    """The post's three models, created in the post's order right after `torch.manual_seed(seed)`.

    `dims` is (vocabulary, embedding/model width, model 2 width, classes). Model 2's input is model
    1's output width (the post wires it to `embedding_dim`, which works only because both are 6).
    `embedding_dim`, when given, makes the embedding narrower or wider than model 1's output.
    """
    vocab, width, width2, classes = dims
    with _GLOBAL_GENERATOR:  # ranks run as threads build their models at the same moment
        torch.manual_seed(seed)
        model1 = MLPem0(vocab, width if embedding_dim is None else embedding_dim, width)
        model2 = MLP1(width, width2)
        model3 = MLP2L(width2, classes)
    return SplitModels(model1, model2, model3)


def model_table(models: SplitModels, parties: Sequence[str] = PARTIES) -> Table:
    """The three models as a table: the party that holds each, its layers and its parameters."""
    modules = models.as_list()
    if len(parties) != len(modules):
        raise ValueError(f"parties names one party per model ({len(modules)}); got {len(parties)}")
    rows = [
        {
            "model": f"model{k}",
            "party": party,
            "layers": " → ".join(type(layer).__name__ for layer in model.children()),
            "parameters": ", ".join(f"{n} {shape_text(p)}" for n, p in model.named_parameters()),
        }
        for k, (model, party) in enumerate(zip(modules, parties, strict=True), start=1)
    ]
    return Table(["model", "party", "layers", "parameters"], rows)


def post_tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """The post's input and label, as the post builds them (LongTensors)."""
    return torch.tensor(POST_INPUT), torch.tensor(POST_LABEL)


def token_tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """The post's input and the label it meant: one class index (1) per token."""
    return torch.tensor(POST_INPUT), torch.tensor(TOKEN_TARGET)


def token_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The loss the post meant: cross-entropy per token (classes in the last dim), averaged.

    `out` [..., C] is flattened to [N, C] and `target` (class indices) to [N]. Unlike the post's
    call, every parameter, biases included, gets a gradient that is not zero by construction.
    """
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _label_holder(
    model3: MLP2L, features: torch.Tensor, label: torch.Tensor, loss_fn: LossFn | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Model 3's output and loss: its own (the post's) loss, or `loss_fn(out, label)`."""
    if loss_fn is None:
        return model3(features, label)
    out = model3.layer(features)
    return out, loss_fn(out, label)


def clone_models(models: SplitModels) -> SplitModels:
    """An independent deep copy (parameters and any .grad), to run a second flow alongside."""
    twin = copy.deepcopy(models)
    originals = models.named_parameters()
    for name, p in twin.named_parameters().items():  # deepcopy of a Parameter drops its .grad
        grad = originals[name].grad
        p.grad = None if grad is None else grad.detach().clone()
    return twin


def load_parameters(models: SplitModels, named: Mapping[str, torch.Tensor]) -> SplitModels:
    """Copy values named as in `SplitModels.named_parameters()` into `models`; return it."""
    params = models.named_parameters()
    if set(named) != set(params):
        missing = sorted(set(params) - set(named))
        extra = sorted(set(named) - set(params))
        raise ValueError(f"parameter names differ (missing: {missing}; unexpected: {extra})")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(named[name])
    return models


def make_optimizers(models: SplitModels, lr: float = 0.01) -> list[torch.optim.Optimizer]:
    """One Adam optimizer per model, as in the post."""
    return [torch.optim.Adam(m.parameters(), lr) for m in models.as_list()]


def make_one_optimizer(models: SplitModels, lr: float = 0.01) -> torch.optim.Optimizer:
    """One Adam over all three models, one parameter group each (the post's commented-out line)."""
    return torch.optim.Adam([{"params": m.parameters()} for m in models.as_list()], lr)


def cut(activation: torch.Tensor) -> torch.Tensor:
    """The hand-off across a cut: a new leaf with the same values, in its own memory, which will
    receive a .grad. detach() first, so clone() records nothing (notebook 03, section 4); the copy
    keeps an in-place edit on one side from reaching the other in one process."""
    return activation.detach().clone().requires_grad_(True)


@dataclass
class SplitResult:
    """Everything one split step produced, for inspection; `calls` lists what ran, in order."""

    f1: torch.Tensor
    ff1: torch.Tensor
    f2: torch.Tensor
    ff2: torch.Tensor
    out: torch.Tensor
    loss: torch.Tensor
    calls: list[str] = field(default_factory=list)

    def script(self) -> str:
        """The calls that ran, one per line."""
        return "\n".join(self.calls)


def _check_stages(values: Collection[int], argument: str) -> None:
    bad = [v for v in values if v not in (1, 2, 3)]
    if bad:
        raise ValueError(f"{argument} names models 1, 2 and 3; got {bad}")


def run_split(
    models: SplitModels,
    tokens: torch.Tensor,
    label: torch.Tensor,
    optimizers: Sequence[torch.optim.Optimizer | None] | None = None,
    *,
    cut_fn: Callable[[torch.Tensor], torch.Tensor] = cut,
    order: Sequence[int] = SPLIT_ORDER,
    handoff: Mapping[int, str] | None = None,
    zero_grad: Collection[int] | None = None,
    loss_fn: LossFn | None = None,
) -> SplitResult:
    """One split step, stage by stage, with knobs to reproduce the usual mistakes.

    - `optimizers`: one entry per model (an optimizer or None); model k's entry gets `zero_grad()`
      before stage k's backward and `step()` after it, as in the post. `[None, None, opt]` puts one
      optimizer's calls at the first backward stage only.
    - `cut_fn`: how each activation crosses a cut (default `cut`; the bug: no `requires_grad_()`).
    - `order`: which stages run backward, in which order (default 3, 2, 1).
    - `handoff`: stage -> name of the tensor whose `.grad` that stage receives (default
      `{2: "ff2", 1: "ff1"}`; the bug: `{1: "ff2"}`).
    - `zero_grad`: the models whose optimizer is zeroed (default: all that have one).
    - `loss_fn`: `loss_fn(out, label)` instead of model 3's own loss (the post's), e.g.
      `token_loss` with the label `TOKEN_TARGET`.
    Errors torch raises (e.g. backward with a `.grad` that is still None) propagate unchanged.
    """
    if optimizers is not None and len(optimizers) != 3:
        raise ValueError(
            f"optimizers needs one entry per model (3, None allowed); got {len(optimizers)}"
        )
    _check_stages(order, "order")
    sources = {2: "ff2", 1: "ff1"} if handoff is None else {2: "ff2", 1: "ff1", **handoff}
    _check_stages(sources, "handoff")
    names = ["f1", "ff1", "f2", "ff2", "out", "loss"]
    for stage, source in sources.items():
        if source not in names:
            raise ValueError(f"handoff[{stage}] = {source!r}; choose one of {names}")
    zeroed = {1, 2, 3} if zero_grad is None else set(zero_grad)
    _check_stages(zeroed, "zero_grad")

    f1 = models.model1(tokens)
    ff1 = cut_fn(f1)
    f2 = models.model2(ff1)
    ff2 = cut_fn(f2)
    out, loss = _label_holder(models.model3, ff2, label, loss_fn)
    result = SplitResult(f1, ff1, f2, ff2, out, loss)
    tensors = {"f1": f1, "ff1": ff1, "f2": f2, "ff2": ff2, "out": out, "loss": loss}
    roots = {3: "loss", 2: "f2", 1: "f1"}

    for stage in order:
        opt = optimizers[stage - 1] if optimizers is not None else None
        if opt is not None and stage in zeroed:
            opt.zero_grad()
            result.calls.append(f"optim{stage}.zero_grad()")
        root = tensors[roots[stage]]
        if stage == 3:
            result.calls.append("loss.backward()")
            root.backward()
        else:
            source = sources[stage]
            result.calls.append(f"{roots[stage]}.backward({source}.grad)")
            root.backward(tensors[source].grad)
        if opt is not None:
            opt.step()
            result.calls.append(f"optim{stage}.step()")
    return result


def joint_step(
    models: SplitModels,
    tokens: torch.Tensor,
    label: torch.Tensor,
    optimizers: list[torch.optim.Optimizer] | None = None,
    *,
    loss_fn: LossFn | None = None,
) -> SplitResult:
    """The same step with no cuts: one graph, one backward; f1 and f2 retain their grads.

    `loss_fn(out, label)`, when given, replaces the post's loss as in `run_split`.
    """
    calls = []
    if optimizers is not None:
        for opt in optimizers:
            opt.zero_grad()
        calls.append("zero_grad() on every optimizer")
    f1 = models.model1(tokens)
    f1.retain_grad()
    f2 = models.model2(f1)
    f2.retain_grad()
    out, loss = _label_holder(models.model3, f2, label, loss_fn)
    loss.backward()
    calls.append("loss.backward()")
    if optimizers is not None:
        for opt in optimizers:
            opt.step()
        calls.append("step() on every optimizer")
    return SplitResult(f1, f1, f2, f2, out, loss, calls)


COMPARE_COLUMNS = ["tensor", "same", "max |Δ|", "note"]


#: Differences below this show as "< 1e-06": their digits are rounding noise that varies by CPU.
TINY = 1e-6


def _max_abs_text(delta: torch.Tensor) -> str:
    largest = float(delta.max()) if delta.numel() else 0.0
    if largest == 0:
        return "0"
    return "< 1e-06" if largest < TINY else f"{largest:.2g}"


def compare_tensors(
    pairs: Mapping[str, tuple[torch.Tensor | None, torch.Tensor | None]],
    *,
    labels: tuple[str, str] = ("a", "b"),
    atol: float = 0.0,
    title: str | None = None,
) -> Table:
    """A table saying, per named pair, whether the two tensors are equal (within `atol`).

    `same` is True when shapes match and every |Δ| <= atol (atol 0: bitwise equal); `max |Δ|` is
    text: "0", "< 1e-06", or 2 significant digits; a `note` column (only when needed) says when a
    tensor is None or shapes differ.
    """
    rows = []
    for name, (a, b) in pairs.items():
        row = {"tensor": name, "same": False, "max |Δ|": "-", "note": ""}
        if a is None or b is None:
            missing = [lab for lab, t in zip(labels, (a, b), strict=True) if t is None]
            row["same"] = a is None and b is None
            row["note"] = f"None in {' and '.join(missing)}"
        elif a.shape != b.shape:
            row["note"] = f"shapes differ: {shape_text(a)} vs {shape_text(b)}"
        else:
            diff = (a.detach().double() - b.detach().double()).abs()
            row["max |Δ|"] = _max_abs_text(diff)
            row["same"] = bool(diff.numel() == 0 or float(diff.max()) <= atol)
        rows.append(row)
    same = sum(r["same"] for r in rows)
    how = (
        say("common", "tables.bitwise")
        if atol == 0
        else say("common", "tables.within", atol=f"{atol:g}")
    )
    note = say(
        "common",
        "tables.compare_note",
        same=same,
        count=len(rows),
        how=how,
        a=phrase(None, labels[0]),
        b=phrase(None, labels[1]),
    )
    columns = COMPARE_COLUMNS if any(r["note"] for r in rows) else COMPARE_COLUMNS[:-1]
    return Table(columns, rows, title=title, note=note)


def compare_models(
    a: SplitModels,
    b: SplitModels,
    *,
    what: str = "grad",
    labels: tuple[str, str] = ("split", "joint"),
    extra: Mapping[str, tuple[torch.Tensor | None, torch.Tensor | None]] | None = None,
    atol: float = 0.0,
    title: str | None = None,
) -> Table:
    """Compare two SplitModels parameter by parameter: `.grad` (what='grad') or values ('param').

    `extra` adds more named pairs (e.g. `{"ff1.grad vs f1.grad": (split.ff1.grad, joint.f1.grad)}`).
    """
    if what not in ("grad", "param"):
        raise ValueError(f"what is 'grad' or 'param', got {what!r}")
    pa, pb = a.named_parameters(), b.named_parameters()
    if pa.keys() != pb.keys():
        raise ValueError("the two SplitModels have different parameter names")
    pairs: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = {}
    for name in pa:
        if what == "grad":
            pairs[f"{name}.grad"] = (pa[name].grad, pb[name].grad)
        else:
            pairs[name] = (pa[name], pb[name])
    pairs.update(extra or {})
    return compare_tensors(pairs, labels=labels, atol=atol, title=title)


def models_with_grad(models: SplitModels) -> list[str]:
    """Which models ('model1', ...) have a .grad on every parameter."""
    return [
        f"model{k}"
        for k, m in enumerate(models.as_list(), start=1)
        if all(p.grad is not None for p in m.parameters())
    ]


def changed_models(before: Mapping[str, torch.Tensor], models: SplitModels) -> list[str]:
    """Which models ('model1', ...) have a parameter that differs from the snapshot `before`."""
    changed = []
    for name, p in models.named_parameters().items():
        owner = name.split(".", 1)[0]
        if owner not in changed and not torch.equal(before[name], p.detach()):
            changed.append(owner)
    return changed


def arrangement_table(
    runs: Mapping[str, SplitModels],
    start: Mapping[str, torch.Tensor],
    reference: SplitModels,
    *,
    reference_name: str = "one Adam per model",
) -> Table:
    """One row per run: which models moved away from `start`, and whether every parameter ends
    bitwise equal to `reference`'s (e.g. the post's step with one Adam per model)."""
    same = f"same as {reference_name}"
    rows = []
    for name, models in runs.items():
        if not isinstance(models, SplitModels):
            raise TypeError(f"runs[{name!r}] is {a_type(models)}, not SplitModels")
        rows.append(
            {
                "arrangement": name,
                "models changed": ", ".join(changed_models(start, models)) or "none",
                same: all(compare_models(models, reference, what="param").column("same")),
            }
        )
    return Table(["arrangement", "models changed", same], rows)
