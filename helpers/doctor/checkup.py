"""`doctor(model)` and the `Checkup` it returns: for every parameter of one training step, did it
get a gradient, is it in the optimizer that stepped, did it move; and for every one that did not
learn, why, and the line.

    from helpers.doctor import doctor

    with doctor(model) as checkup:          # wrap one step of your own, as you wrote it
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
    checkup                                  # a table, then each finding with its line

The checkup only ties the three parts together: `record` watches the step, `verdicts` concludes
from what it recorded, `report` shows the conclusion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from helpers import naming
from helpers.doctor import report
from helpers.doctor.record import Location, Recorder
from helpers.doctor.unregistered import Unregistered, find_unregistered
from helpers.doctor.verdicts import Finding, conclude


class Checkup:
    """What `doctor(model)` found in one step: `rows` (a table), `findings`, `cause(name)`."""

    def __init__(
        self,
        named: dict[str, torch.Tensor],
        modules: dict[str, torch.nn.Module],
        unregistered: Sequence[Unregistered] = (),
    ):
        if not isinstance(named, dict) or not isinstance(modules, dict):
            raise TypeError(
                f"Checkup({type(named).__name__}, ...) takes the parameters by name; make it with "
                "doctor(model) instead: with doctor(model) as checkup: <one training step>"
            )
        self._recorder = Recorder(named, modules, unregistered)
        self._state = "ready"
        self.error: BaseException | None = None

    # -- while the block runs ---------------------------------------------------------------
    def __enter__(self) -> Checkup:
        if self._state != "ready":
            raise RuntimeError(
                "this checkup was already used for a step; make a new one: "
                "with doctor(model) as checkup: ..."
            )
        self._state = "running"
        self._recorder.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        record = self._recorder.stop(exc_type, exc, tb)
        self.error = exc
        self._state = "done"
        conclusion = conclude(record)
        self.findings: list[Finding] = conclusion.findings
        self.rows = report.table(conclusion)
        self._verdicts = conclusion.verdicts
        self._count = len(conclusion.parameters)
        self._recorder.forget()  # the graph and the cuts' inputs are not needed any more
        if exc is not None:
            problems = [f for f in self.findings if f.problem]
            if problems:
                exc.add_note(report.note_on_error(problems[0]))
        return False

    # -- what the learner reads ---------------------------------------------------------------
    def _done(self) -> None:
        if self._state != "done":
            raise RuntimeError(
                "the checkup is read after its step: "
                "with doctor(model) as checkup: <one training step>, then read checkup"
            )

    def cause(self, name: str) -> str:
        """The verdict for parameter `name`: "learned" or a key of `CAUSES`."""
        self._done()
        if name not in self._verdicts:
            raise KeyError(f"no parameter {name!r}; the parameters are {', '.join(self._verdicts)}")
        return self._verdicts[name].cause

    def where(self, name: str) -> Location | None:
        """The line of the learner's code behind parameter `name`'s verdict, if there is one."""
        self.cause(name)
        return self._verdicts[name].location

    @property
    def problems(self) -> list[Finding]:
        """The findings that are bugs (not a frozen layer, not accumulation on purpose)."""
        self._done()
        return [f for f in self.findings if f.problem]

    @property
    def healthy(self) -> bool:
        """True when every parameter learned, or was frozen, with no problem found."""
        return not self.problems

    def summary(self) -> str:
        self._done()
        return report.summary(self._count, self.problems)

    def __repr__(self) -> str:
        if self._state != "done":
            return report.unfinished(self._state)
        return report.as_text(self.rows, self.summary(), self.findings)

    def _repr_html_(self) -> str:
        if self._state != "done":
            return report.unfinished_html(self._state)
        return report.as_html(self.rows, self.summary(), self.findings)


def doctor(model: object) -> Checkup:
    """A checkup of one training step of `model` (an `nn.Module`, or a dict of name -> tensor):
    `with doctor(model) as checkup: <the step>`, then show `checkup`."""
    example = "with doctor(model) as checkup: <one training step>"
    if isinstance(model, Checkup):
        raise TypeError(f"doctor() got a checkup, not a model; {example}")
    named = naming.named_tensors(model, "doctor()", example=example)
    unregistered = find_unregistered(model) if isinstance(model, torch.nn.Module) else []
    if not named and not unregistered:
        raise ValueError(f"doctor() got a model with no parameters, nothing to check; {example}")
    modules = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    return Checkup(named, modules, unregistered)
