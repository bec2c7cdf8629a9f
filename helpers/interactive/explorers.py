"""What the graph explorer and the optimizer lab compute, as plain functions that pytest calls.

The widgets in `helpers.interactive.widgets` only read their controls, call one of these
functions and put the returned picture and table on screen (drawn by
`helpers.interactive.widget_pictures`). Everything here is ordinary data: code text, tensors,
`AutogradGraph`s, `Table`s.

- `explore_graph`: the graph explorer's program (a cut between two models) for one setting of its
  toggles, actually run, with its graph and `tensor_state` table.
- `optimizer_code` and `optimizer_run`: one split-learning step of the first post's three models
  with a chosen optimizer arrangement, as the lines of code the lab shows and then runs, with
  what each `step()` call moved and which parameters moved by how much (with the post's loss, or
  with the per-token loss it meant).

The backward stepper's logic is `helpers.interactive.backward_recorder`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from helpers.display import Figure, Table, figure_phrase, figure_words
from helpers.graph import AutogradGraph, autograd_graph
from helpers.language import phrase, say
from helpers.params import ParamDiff, diff_figure, param_diff, snapshot
from helpers.state import tensor_state

__all__ = [
    "ARRANGEMENTS",
    "LOSSES",
    "NOISE",
    "OPTIMIZERS",
    "ExplorerResult",
    "OptimizerRun",
    "explore_graph",
    "explorer_code",
    "optimizer_code",
    "optimizer_run",
]


def _comment(key: str, **fields: object) -> str:
    """A comment of the programs the widgets show, in the learner's language (code stays code)."""
    return "  # " + say("common", f"explorer_code.{key}", **fields)


# --------------------------------------------------------------------------------------------
# Graph explorer: a cut between two models, three toggles
# --------------------------------------------------------------------------------------------


def explorer_code(detach: bool, input_requires_grad: bool, retain_grad: bool) -> str:
    """The program the graph explorer runs for one setting of its three toggles."""
    rg = ", requires_grad=True"
    lines = [
        f"x = torch.tensor([1.0, 2.0, 3.0]{rg if input_requires_grad else ''})"
        + _comment("the_input"),
        f"w1 = torch.tensor([0.5, -1.0, 2.0]{rg})" + _comment("model_1"),
        "h = w1 * x" + _comment("the_intermediate"),
    ]
    if retain_grad:
        lines.append("h.retain_grad()")
    lines.append(f"w2 = torch.tensor([2.0, 1.0, -1.0]{rg})" + _comment("model_2"))
    if detach:
        lines += ["h_cut = h.detach()" + _comment("the_cut"), "y = (h_cut * w2).sum()"]
    else:
        lines.append("y = (h * w2).sum()" + _comment("no_cut"))
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
    graph = AutogradGraph(data, title=say("common", "explorer_code.graph_title"))
    return ExplorerResult(code, tensors, graph, tensor_state(**tensors))  # type: ignore[arg-type]


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
        "models = build_models(seed=42)" + _comment("posts_models"),
        "f1 = models.model1(tokens)",
        "ff1 = f1.clone().detach().requires_grad_(True)" + _comment("cut", k=1),
        "f2 = models.model2(ff1)",
        "ff2 = f2.clone().detach().requires_grad_(True)" + _comment("cut", k=2),
    ]
    if loss == LOSSES[1]:
        lines += [
            "out = models.model3.layer(ff2)",
            "loss = token_loss(out, target)" + _comment("per_token"),
        ]
    else:
        lines.append("out, loss = models.model3(ff2, label)" + _comment("posts_loss"))
    if arrangement == ARRANGEMENTS[0]:
        params = "m.parameters()"
        lines.append(f"opts = [{make.format(params=params, lr=lr_text)} for m in models.as_list()]")
        picks = ["opts[2]", "opts[1]", "opts[0]"]
    else:
        lines += [
            "params = [p for m in models.as_list() for p in m.parameters()]",
            f"opt = {make.format(params='params', lr=lr_text)}" + _comment("one_for_all"),
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

    def setting(self, drawn: bool = False) -> str:
        """The setting that ran, in words ("Adam, lr=0.01, one per model, set_to_none=True"): in
        the learner's language, or, `drawn`, in the language the figure is drawn in."""
        words = figure_words if drawn else lambda key, **v: say("common", f"figures.{key}", **v)
        named = figure_phrase if drawn else lambda english: phrase(None, english)
        loss = "" if self.loss == LOSSES[0] else words("lab_loss", loss=named(self.loss))
        return words(
            "lab_setting",
            optimizer=named(self.optimizer),
            lr=f"{self.lr:g}",
            arrangement=named(self.arrangement),
            set_to_none=self.set_to_none,
            loss=loss,
        )

    def figure_title(self) -> str:
        """The heatmaps' title: the setting that ran, in the figure's language."""
        return self.setting(drawn=True)

    def figure(self) -> Figure:
        """Heatmaps of what changed, per parameter (drawn once, then reused)."""
        cached = self.__dict__.get("_figure")
        if cached is None:
            cached = diff_figure(self.diff, title=self.figure_title())
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
