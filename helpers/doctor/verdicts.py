"""What the doctor concludes from a finished record: for every parameter, a verdict (learned, or
why not, and the line of the learner's code behind it); the parameters with the same verdict
grouped into one finding. Nothing here watches a step: `conclude(record)` only reads the record
(and the tensors, graphs and optimizers it points to, as they are after the block)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from helpers.doctor.record import (
    CALLS_TO_PYTHON,
    Cut,
    Location,
    ParameterRecord,
    Record,
    nonfinite_kind,
    reach,
)
from helpers.language import say

#: Every verdict the doctor gives a parameter, and whether it is a problem. A frozen parameter
#: and gradients accumulated over several backward calls are said, not blamed.
CAUSES = {
    "learned": False,
    "frozen": False,
    "accumulated": False,
    "no_backward": True,
    "loss_flag": True,
    "stopped": True,
    "cut": True,
    "handoff_not_called": True,
    "module_not_called": True,
    "unused": True,
    "not_reaching_loss": True,
    "none_from_function": True,
    "nonfinite": True,
    "diverged": True,
    "grad_returned": True,
    "wrong_handoff": True,
    "leftover": True,
    "no_step": True,
    "other_model": True,
    "unregistered": True,
    "not_in_optimizer": True,
    "cleared_before_step": True,
    "zero_gradient": True,
    "not_moved": True,
    "rounded_away": True,
}


@dataclass(frozen=True)
class Finding:
    """Why one or more parameters did not learn (or a note that is not a bug)."""

    cause: str
    parameters: tuple[str, ...]
    message: str
    location: Location | None = None

    @property
    def problem(self) -> bool:
        return CAUSES[self.cause]

    def __str__(self) -> str:
        where = f"\n    {self.location}" if self.location else ""
        return f"{', '.join(self.parameters)}: {self.message}{where}"


class Verdict(NamedTuple):
    """One parameter's verdict: a key of `CAUSES`, its message, the line behind it."""

    cause: str
    message: str
    location: Location | None


@dataclass(frozen=True)
class Judged:
    """One parameter after the block: its gradient, its optimizers, how far it moved, why."""

    name: str
    #: of the gradient that arrived (or that torch.autograd.grad handed back, when none
    #: arrived): "None", "NaN", "inf", "zeros" or "finite"
    kind: str
    optimizers: tuple[str, ...]  # the types of the optimizers that stepped holding it
    moved: float  # the largest change of an entry (NaN when its shape changed)
    verdict: Verdict


@dataclass(frozen=True)
class Conclusion:
    """Every parameter's verdict, in the model's order, and the findings (all but "learned")."""

    parameters: list[Judged]
    findings: list[Finding]

    @property
    def verdicts(self) -> dict[str, Verdict]:
        return {p.name: p.verdict for p in self.parameters}


def conclude(record: Record) -> Conclusion:
    """The verdict for every parameter of `record`, and the findings."""
    return _Judge(record).conclude()


def _verdict(cause: str, location: Location | None = None, **values: Any) -> Verdict:
    return Verdict(cause, say("common", f"doctor.{cause}", **values), location)


class _Judge:
    def __init__(self, record: Record) -> None:
        self.record = record
        self._reach_cache: dict[Any, frozenset[int]] = {}  # the graph as it is after the block

    def conclude(self) -> Conclusion:
        # a tensor the model never registered is judged when the step used it or stepped it
        parameters = [
            p
            for p in self.record.parameters.values()
            if p.unregistered is None
            or p.first_use is not None
            or p.incoming is not None
            or self._optimizers(p)
        ]
        kinds = {id(p): _gradient_kind(_gradient(p)) for p in parameters}
        moved = {id(p): _moved(p) for p in parameters}
        judged = [
            Judged(
                name=p.name,
                kind=kinds[id(p)],
                optimizers=self._optimizers(p),
                moved=moved[id(p)],
                verdict=self._verdict(p, kinds[id(p)], moved[id(p)]),
            )
            for p in parameters
        ]
        grouped: dict[Verdict, list[str]] = {}
        for p in judged:
            grouped.setdefault(p.verdict, []).append(p.name)
        findings = [
            Finding(cause, tuple(names), message, location)
            for (cause, message, location), names in grouped.items()
            if cause != "learned"
        ]
        return Conclusion(judged, findings)

    def _verdict(self, r: ParameterRecord, kind: str, moved: float) -> Verdict:
        record = self.record
        if not (r.trainable and r.tensor.requires_grad):  # frozen before the step, or in it
            return _verdict("frozen")
        held = r.unregistered
        if held is not None and not self._optimizers(r):
            key = "unregistered_nested" if held.nested else "unregistered_in"
            if held.holder == "tensor":
                key = "unregistered_computed" if held.computed else "unregistered_tensor"
            words = {"attribute": held.attribute, "holder": held.holder, "fix": held.fix}
            message = say("common", f"doctor.{key}", **words)
            return Verdict("unregistered", message, held.made_at)
        if r.incoming is None and r.returned is None:
            return self._why_no_gradient(r, moved)
        if kind in ("NaN", "inf"):
            return self._nonfinite(kind)
        steps = [s for s in record.steps if id(r.tensor) in s.held]
        if r.incoming is None:  # torch.autograd.grad handed it back; nothing put it in .grad
            if nonfinite_kind(r.tensor):
                return self._diverged(r, steps)
            if moved > 0:  # updated with it by hand
                return _verdict("learned")
            return _verdict("grad_returned", r.returned_at)
        wrong = [b for b in record.backwards if id(r.tensor) in b.wrong_handoff]
        if wrong:
            return _verdict("wrong_handoff", wrong[0].at)
        if r.leftover:
            key = "leftover_before" if r.leftover_from == "before" else "leftover"
            return Verdict("leftover", say("common", f"doctor.{key}"), r.leftover_at)
        if nonfinite_kind(r.tensor):
            return self._diverged(r, steps)
        if not steps:
            if not record.steps:
                # moved with no optimizer: updated by hand (under no_grad), which is a step too
                return _verdict("learned" if moved > 0 else "no_step")
            mine = {key for key, p in record.parameters.items() if p.unregistered is None}
            if all(not (s.held & mine) for s in record.steps):
                first = record.steps[0]
                # no line: the one that built that optimizer ran before the block, unseen
                return _verdict(
                    "other_model",
                    optimizer=type(first.optimizer).__name__,
                    count=len(first.held),
                )
            return _verdict("not_in_optimizer", record.steps[0].location)
        if kind == "zeros":
            if moved > 0:  # by what the optimizer carries: momentum, Adam's averages, decay
                return Verdict("zero_gradient", say("common", "doctor.zero_gradient_moved"), None)
            return _verdict("zero_gradient")
        if all(id(r.tensor) in s.cleared for s in steps):
            if r.cleared_at is not None:  # seen: the line that cleared it
                return _verdict("cleared_before_step", r.cleared_at)
            message = say("common", "doctor.cleared_unseen")
            return Verdict("cleared_before_step", message, steps[0].location)
        if moved == 0:
            lrs = [
                g["lr"]
                for s in steps
                for g in s.optimizer.param_groups
                if any(p is r.tensor for p in g["params"]) and "lr" in g
            ]
            if lrs and not any(lrs):  # every learning rate that applies to it is 0
                return _verdict("not_moved", steps[0].location, lr=lrs[0])
            largest = float(r.incoming.abs().max())
            return _verdict(
                "rounded_away",
                steps[0].location,
                largest=f"{largest:.1e}",
                dtype=str(r.tensor.dtype).removeprefix("torch."),
            )
        if r.accumulated:
            return _verdict("accumulated", count=r.accumulated + 1)
        return _verdict("learned")

    def _nonfinite(self, kind: str) -> Verdict:
        """Where the NaN or inf of a gradient was made: in the forward pass when a loss backward()
        started from already held one (the first call on that loss's path that made one from
        finite values), else the first backward function that turned finite gradients into one."""
        broken = next((b for b in self.record.backwards if b.root_kind), None)
        if broken is None:
            node, origin = self.record.first_nonfinite or ("?", None)
            return _verdict("nonfinite", origin, kind=kind, node=node)
        words = {"kind": kind, "loss_kind": broken.root_kind}
        made = self.record.made_nonfinite
        graph = broken.root_graph
        on_path = next((m for m in made if m.node is not None and m.node in graph), None)
        if on_path is not None:
            key, where = "nonfinite_forward", on_path
        elif made:
            key, where = "nonfinite_forward_elsewhere", made[0]
        else:
            message = say("common", "doctor.nonfinite_came_in", **words)
            return Verdict("nonfinite", message, broken.at)
        message = say("common", f"doctor.{key}", call=where.call, made=where.kind, **words)
        return Verdict("nonfinite", message, where.location)

    def _diverged(self, r: ParameterRecord, steps: list[Any]) -> Verdict:
        """Finite gradient, values that are not finite after the block: the update overflowed,
        or they were so already."""
        kind = nonfinite_kind(r.tensor)
        if nonfinite_kind(r.before):
            return Verdict("diverged", say("common", "doctor.diverged_before", kind=kind), None)
        dtype = str(r.tensor.dtype).removeprefix("torch.")
        return _verdict("diverged", steps[0].location if steps else None, kind=kind, dtype=dtype)

    def _why_no_gradient(self, r: ParameterRecord, moved: float) -> Verdict:
        record = self.record
        failed = next((b for b in record.backwards if b.error is not None), None)
        if not record.backwards and record.error is None:
            if moved > 0:  # by a gradient the doctor cannot see (torch.func.grad's), or a copy
                return Verdict("no_backward", say("common", "doctor.no_backward_moved"), None)
            return _verdict("no_backward")
        reached_by_graph = [b for b in record.backwards if not b.no_graph]
        cut = self._first_cut(r, intentional=False)
        if record.backwards and not reached_by_graph:
            flagged = next(b.flagged for b in record.backwards if b.no_graph)
            real = say("common", "doctor.real_cut", cut=_describe(cut)) if cut is not None else ""
            return _verdict("loss_flag", flagged, real_cut=real)
        if cut is not None:
            where = cut.grad_off_at if cut.grad_off_at is not None else cut.location
            return _verdict("cut", where, how=_describe(cut))
        if failed is not None or record.error is not None:
            error = failed.error if failed is not None else record.error
            where = failed.at if failed is not None else record.error_at
            return _verdict("stopped", where, error=_error_line(error))
        if r.none_arrived:
            where = r.none_written or r.first_use
            return _verdict("none_from_function", where, node=f"`{r.none_from}`")
        handoff = self._first_cut(r, intentional=True)
        if handoff is not None:
            return _verdict("handoff_not_called", handoff.location)
        if r.first_use is None:
            module = r.name.rpartition(".")[0]
            if module and module in record.modules and module not in record.called:
                return _verdict("module_not_called", module=module)
            return _verdict("unused")
        return _verdict("not_reaching_loss", r.first_use)

    def _first_cut(self, r: ParameterRecord, *, intentional: bool) -> Cut | None:
        """The first cut r's values went through on the way to a loss: a hand-off cut of split
        learning (`intentional`, a leaf that requires grad made from the same values) or any
        other."""
        on_a_path = frozenset().union(*(b.through_cuts for b in self.record.backwards))
        for index, cut in enumerate(self.record.cuts):
            if index not in on_a_path:  # a cut no loss came through (a log line, a metric)
                continue
            if any(
                t is r.tensor or id(r.tensor) in reach(t, self._reach_cache) for t in cut.inputs
            ):
                if self._is_handoff(cut) == intentional:
                    return cut
        return None

    def _is_handoff(self, cut: Cut) -> bool:
        return any(
            leaf.shape == t.shape and torch.equal(leaf.detach(), t.detach())
            for t in cut.inputs
            for leaf in self.record.handoff_leaves
        )

    def _optimizers(self, r: ParameterRecord) -> tuple[str, ...]:
        names: list[str] = []
        for s in self.record.steps:
            label = type(s.optimizer).__name__
            if id(r.tensor) in s.held and label not in names:
                names.append(label)
        return tuple(names)


def _describe(cut: Cut) -> str:
    """How a cut cut: `.detach()`, `torch.no_grad()` entered at a line, `.item()`, ..."""
    if cut.inference:
        return say("common", "doctor.how_inference", call=cut.call)
    if cut.decorated:
        return say("common", "doctor.how_decorated", function=cut.decorated)
    if cut.grad_off_at is not None:
        return say("common", "doctor.how_no_grad", call=cut.call, where=cut.grad_off_at.label)
    if cut.call == "data":
        return say("common", "doctor.how_data")
    if cut.call == "detach":
        return say("common", "doctor.how_detach")
    if cut.call == "tensor":
        return say("common", "doctor.how_tensor")
    if cut.call in CALLS_TO_PYTHON:
        return say("common", "doctor.how_python", call=cut.call)
    if cut.dtype is not None and not (cut.dtype.is_floating_point or cut.dtype.is_complex):
        dtype = str(cut.dtype).removeprefix("torch.")
        return say("common", "doctor.how_integer", call=cut.call, dtype=dtype)
    return say("common", "doctor.how_other", call=cut.call)


def _error_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _gradient(r: ParameterRecord) -> torch.Tensor | None:
    """The gradient that arrived in .grad in the block, or else the one torch.autograd.grad
    handed back for it."""
    return r.incoming if r.incoming is not None else r.returned


def _gradient_kind(grad: torch.Tensor | None) -> str:
    if grad is None:
        return "None"
    if not torch.isfinite(grad).all():
        return "NaN" if torch.isnan(grad).any() else "inf"
    if not grad.any():
        return "zeros"
    return "finite"


def _moved(r: ParameterRecord) -> float:
    now = r.tensor.detach()
    if now.shape != r.before.shape:
        return math.nan
    return float((now - r.before).abs().max()) if now.numel() else 0.0
