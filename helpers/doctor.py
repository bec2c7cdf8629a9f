"""A doctor for one training step: for every parameter, did it get a gradient, is it in the
optimizer that stepped, did it move; and for every one that did not learn, why, and the line.

    from helpers.doctor import doctor

    with doctor(model) as checkup:          # wrap one step of your own, as you wrote it
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
    checkup                                  # a table, then each finding with its line

How it knows: while the block runs, a torch function mode (`torch.overrides.TorchFunctionMode`)
sees every torch call the step makes, with the line of your code that made it. A call whose
inputs require grad and whose result does not (`.detach()`, `.data`, `torch.tensor(...)`, an
integer cast, `.item()`, any operation under `torch.no_grad()`) is a *cut*; a parameter that got
no gradient is explained by the first cut its values went through. Hooks on the parameters see
each gradient arrive (and whether an old one was waiting in `.grad`), a global optimizer hook
sees which optimizer stepped and what it held, and hooks on the backward functions find the first
one that produced a NaN or an infinity. Nothing is changed: the step computes what it would
compute without the doctor.
"""

from __future__ import annotations

import linecache
import math
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from helpers import naming
from helpers.display import Table
from helpers.language import say

__all__ = ["CAUSES", "Checkup", "Finding", "Location", "doctor"]

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
    "nonfinite": True,
    "wrong_handoff": True,
    "leftover": True,
    "no_step": True,
    "other_model": True,
    "not_in_optimizer": True,
    "cleared_before_step": True,
    "zero_gradient": True,
    "not_moved": True,
    "rounded_away": True,
}

_LIBRARY_DIRS = tuple(
    {
        str(Path(p)) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
)
#: Code that is not the learner's: torch and the course's helpers (by module, wherever they are
#: installed), and Python's own and installed packages (by file).
_NOT_LEARNER_MODULES = ("torch", "helpers")


def _is_learners(frame: Any) -> bool:
    module = frame.f_globals.get("__name__", "")
    if module.partition(".")[0] in _NOT_LEARNER_MODULES:
        return False
    return not frame.f_code.co_filename.startswith(_LIBRARY_DIRS)


#: Calls that leave torch for a Python value: a cut, though they return no tensor.
_CALLS_TO_PYTHON = {"item", "tolist", "numpy", "__float__", "__int__", "__index__"}
#: Calls torch reports to a function mode that compute nothing a gradient could flow through.
_NOT_OPERATIONS = {"backward", "register_hook", "retain_grad", "requires_grad_", "__set__"}


@dataclass(frozen=True)
class Location:
    """A line of the learner's code: a file (or a notebook cell) and a line number."""

    filename: str
    line: int
    function: str

    @property
    def label(self) -> str:
        """`the cell "class Net(nn.Module):", line 3` for a notebook cell, `train.py:40` for a
        file. A cell is named by its first line of code, not by its In [n]: that number depends
        on how the kernel was driven (nbval does not count), and on what ran before."""
        if _cell_number(self.filename) is not None:
            return say("common", "doctor.in_cell", cell=_first_line(self.filename), line=self.line)
        return f"{Path(self.filename).name}:{self.line}"

    @property
    def code(self) -> str:
        """The line itself, as written (stripped), or "" when the source is not available."""
        return linecache.getline(self.filename, self.line).strip()

    def __str__(self) -> str:
        return f"{self.label}: {self.code}" if self.code else self.label


def _cell_number(filename: str) -> int | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is installed with the course
        return None
    shell = get_ipython()
    names = getattr(getattr(shell, "compile", None), "_filename_map", {})
    number = names.get(filename)
    return number if isinstance(number, int) else None


def _first_line(filename: str) -> str:
    """A cell's first line of code (not a comment), cut to 40 characters."""
    for line in linecache.getlines(filename):
        text = line.strip()
        if text and not text.startswith("#"):
            return text if len(text) <= 40 else text[:39] + "…"
    return "?"


def _learner_location(frame: Any = None) -> Location | None:
    """The innermost frame of the learner's code on the stack (not torch, helpers or Python's)."""
    frame = frame or sys._getframe(1)
    while frame is not None:
        if _is_learners(frame):
            return Location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def _decorated_function(frame: Any) -> str | None:
    """The function a grad-mode decorator wraps, when the grad mode was switched by one."""
    while frame is not None:
        # torch's decorator wrapper (its frame is renamed after the grad mode from torch 2.15)
        in_wrapper = frame.f_globals.get("__name__") == "torch.utils._contextlib"
        if in_wrapper and "func" in frame.f_locals:
            return getattr(frame.f_locals["func"], "__name__", None)
        if _is_learners(frame):
            return None
        frame = frame.f_back
    return None


def _call_name(func: Any) -> str:
    """`detach`, `tensor`, `data` (the property), `requires_grad=` (its setter), ..."""
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__"):
        owner = getattr(getattr(func, "__self__", None), "__name__", "")
        return owner if name == "__get__" else f"{owner}="
    return name


@dataclass
class _Cut:
    """A call whose inputs required grad and whose result does not."""

    call: str
    location: Location | None
    inputs: list[torch.Tensor]
    grad_off_at: Location | None = None
    decorated: str | None = None
    inference: bool = False
    dtype: torch.dtype | None = None


@dataclass
class _Step:
    """One `optimizer.step()` the block made."""

    optimizer: torch.optim.Optimizer
    location: Location | None
    held: set[int]
    cleared: set[int]


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


@dataclass
class _Parameter:
    name: str
    tensor: torch.Tensor
    before: torch.Tensor
    trainable: bool
    incoming: torch.Tensor | None = None  # the sum of the gradients that arrived in the block
    #: whose gradient `.grad` holds: "" (none), "before" (from before the block), "block" (this
    #: block's backward, not stepped yet) or "stepped" (an optimizer has used it)
    waiting: str = ""
    leftover: bool = False
    leftover_at: Location | None = None
    accumulated: int = 0
    first_use: Location | None = None
    kind: str = ""
    moved: float = 0.0


class _Watch(TorchFunctionMode):
    """Sees every torch call of the block and tells the checkup."""

    def __init__(self, checkup: Checkup) -> None:
        super().__init__()
        self.checkup = checkup

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        checkup = self.checkup
        if checkup._busy:  # the doctor's own arithmetic, in a hook: not the learner's step
            return func(*args, **kwargs)
        name = _call_name(func)
        if name == "backward":
            return checkup._backward(func, args, kwargs)
        if name == "_set_grad_enabled" and args and args[0] is False:
            frame = sys._getframe(1)
            checkup._grad_off = (_learner_location(frame), _decorated_function(frame))
        result = func(*args, **kwargs)
        if not checkup._in_step:
            checkup._saw(name, args, kwargs, result)
        return result


class Checkup:
    """What `doctor(model)` found in one step: `rows` (a table), `findings`, `cause(name)`."""

    def __init__(self, named: dict[str, torch.Tensor], modules: dict[str, torch.nn.Module]):
        self._named = named
        self._modules = modules
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
        self._params: dict[int, _Parameter] = {}
        self._handles: list[Any] = []
        self._cuts: list[_Cut] = []
        self._steps: list[_Step] = []
        self._backwards: list[dict[str, Any]] = []
        self._flagged: dict[int, Location | None] = {}
        self._handoff_leaves: list[torch.Tensor] = []
        self._called: set[str] = set()
        self._grad_off: tuple[Location | None, str | None] = (None, None)
        self._in_step = False
        self._busy = False
        self._origin: dict[Any, Location | None] = {}
        self._first_nonfinite: tuple[str, Location | None] | None = None
        self._reach_cache: dict[Any, frozenset[int]] = {}
        for name, tensor in self._named.items():
            self._watch_parameter(name, tensor)
        for name, module in self._modules.items():
            self._handles.append(
                module.register_forward_pre_hook(lambda *_, name=name: self._called.add(name))
            )
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles.append(register_optimizer_step_pre_hook(self._step_begins))
        self._handles.append(register_optimizer_step_post_hook(self._step_ends))
        self._mode = _Watch(self)
        self._mode.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._mode.__exit__(exc_type, exc, tb)
        for handle in self._handles:
            handle.remove()
        self.error = exc
        self._error_at = None
        while tb is not None:  # the innermost line of the learner's code the error passed
            if _is_learners(tb.tb_frame):
                self._error_at = Location(
                    tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name
                )
            tb = tb.tb_next
        self._state = "done"
        self._conclude()
        if exc is not None:
            problems = [f for f in self.findings if f.problem]
            if problems:
                exc.add_note(say("common", "doctor.note_on_error", finding=str(problems[0])))
        return False

    def _watch_parameter(self, name: str, tensor: torch.Tensor) -> None:
        grad = tensor.grad
        record = _Parameter(
            name=name,
            tensor=tensor,
            before=tensor.detach().clone(),
            trainable=tensor.requires_grad,
            waiting="before" if grad is not None and grad.any() else "",
        )
        self._params[id(tensor)] = record
        if tensor.requires_grad and tensor.is_leaf:
            self._handles.append(tensor.register_hook(lambda g, r=record: self._arrives(r, g)))

    def _arrives(self, record: _Parameter, grad: torch.Tensor) -> None:
        self._busy = True
        try:
            self._record_arrival(record, grad)
        finally:
            self._busy = False

    def _record_arrival(self, record: _Parameter, grad: torch.Tensor) -> None:
        current = record.tensor.grad
        if current is not None and current.any():
            if record.waiting in ("before", "stepped") and not record.leftover:
                record.leftover = True
                record.leftover_at = self._backwards[-1]["at"] if self._backwards else None
            elif record.waiting == "block":
                record.accumulated += 1
        record.waiting = "block"
        g = grad.detach()
        record.incoming = g.clone() if record.incoming is None else record.incoming + g

    def _backward(self, func: Any, args: tuple, kwargs: dict) -> Any:
        root = args[0] if args else kwargs.get("self")
        location = _learner_location(sys._getframe(2))
        entry: dict[str, Any] = {"at": location, "flagged": None, "no_graph": False}
        if isinstance(root, torch.Tensor):
            if root.grad_fn is None and root.requires_grad and id(root) not in self._params:
                entry["no_graph"] = True
                entry["flagged"] = self._flagged.get(id(root), location)
        gradient = args[1] if len(args) > 1 else kwargs.get("gradient")
        if isinstance(root, torch.Tensor) and isinstance(gradient, torch.Tensor):
            entry["wrong_handoff"] = self._wrong_handoff(root, gradient)
        self._backwards.append(entry)
        hooks = self._watch_nonfinite(root) if isinstance(root, torch.Tensor) else []
        try:
            return func(*args, **kwargs)
        except Exception as err:
            entry["error"] = err
            raise
        finally:
            for handle in hooks:
                handle.remove()

    def _wrong_handoff(self, root: torch.Tensor, gradient: torch.Tensor) -> frozenset[int]:
        """When `root.backward(leaf.grad)` is handed the gradient of a cut leaf whose values are not
        root's (split learning's wrong hand-off), the parameters root's graph reaches."""
        for leaf in self._handoff_leaves:
            if leaf.grad is gradient:
                same = leaf.shape == root.shape and torch.equal(leaf.detach(), root.detach())
                if not same and root.grad_fn is not None:
                    return self._reach(root)
                return frozenset()
        return frozenset()

    def _watch_nonfinite(self, root: torch.Tensor) -> list[Any]:
        """A hook on every backward function of root's graph: the first to output a NaN or inf
        from finite gradients is the one that produced it."""
        handles, seen, todo = [], set(), [root.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
            if type(node).__name__ == "AccumulateGrad":
                continue

            def check(grad_inputs, grad_outputs, node=node):
                if self._first_nonfinite is not None:
                    return
                self._busy = True
                try:
                    if not _finite(grad_inputs) and _finite(grad_outputs):
                        self._first_nonfinite = (node.name(), self._origin.get(node))
                finally:
                    self._busy = False

            handles.append(node.register_hook(check))
        return handles

    def _saw(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        if name == "requires_grad=":
            if len(args) > 1 and args[1] is True and isinstance(args[0], torch.Tensor):
                self._flagged[id(args[0])] = _learner_location(sys._getframe(2))
                self._handoff_leaves.append(args[0])
            return
        if name == "requires_grad_" and isinstance(result, torch.Tensor) and result.is_leaf:
            if result.requires_grad and id(result) not in self._params:
                self._handoff_leaves.append(result)
            return
        if name in _NOT_OPERATIONS or (name != "data" and _is_property(name, args)):
            return
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        for t in inputs:
            record = self._params.get(id(t))
            if record is not None and record.first_use is None:
                record.first_use = _learner_location(sys._getframe(2))
        if not any(t.requires_grad for t in inputs):
            return
        outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        if any(t.requires_grad for t in outputs):
            for t in outputs:
                if t.grad_fn is not None and t.grad_fn not in self._origin:
                    self._origin[t.grad_fn] = _learner_location(sys._getframe(2))
            return
        if not outputs and name not in _CALLS_TO_PYTHON:
            return
        grad_off_at, decorated = (None, None)
        if not torch.is_grad_enabled():
            grad_off_at, decorated = self._grad_off
        self._cuts.append(
            _Cut(
                call=name,
                location=_learner_location(sys._getframe(2)),
                inputs=[t for t in inputs if t.requires_grad],
                grad_off_at=grad_off_at,
                decorated=decorated,
                inference=torch.is_inference_mode_enabled(),
                dtype=outputs[0].dtype if outputs else None,
            )
        )

    def _step_begins(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._busy = True
        try:
            self._record_step(optimizer)
        finally:
            self._busy = False
        self._in_step = True

    def _record_step(self, optimizer: torch.optim.Optimizer) -> None:
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        cleared = set()
        for key in held & self._params.keys():
            record = self._params[key]
            grad = record.tensor.grad
            holds = grad is not None and bool(grad.any())
            if record.incoming is not None and not holds:
                cleared.add(key)  # a zero gradient that arrived as zeros is told apart later
            if holds:
                record.waiting = "stepped"
        self._steps.append(_Step(optimizer, _learner_location(sys._getframe(1)), held, cleared))

    def _step_ends(self, *_: Any) -> None:
        self._in_step = False

    # -- after the block ----------------------------------------------------------------------
    def _conclude(self) -> None:
        self._reach_cache = {}  # the graph may have changed since the block's hand-off checks
        self.findings: list[Finding] = []
        verdicts: dict[str, tuple[str, str, Location | None]] = {}
        for record in self._params.values():
            record.kind, record.moved = _gradient_kind(record.incoming), _moved(record)
        for record in self._params.values():
            verdicts[record.name] = self._verdict(record)
        grouped: dict[tuple[str, str, Location | None], list[str]] = {}
        for name, verdict in verdicts.items():
            grouped.setdefault(verdict, []).append(name)
        for (cause, message, location), names in grouped.items():
            if cause != "learned":
                self.findings.append(Finding(cause, tuple(names), message, location))
        self.rows = Table(
            ["parameter", "gradient", "optimizer", "max |Δ|", "verdict"],
            [
                {
                    "parameter": r.name,
                    "gradient": say("common", f"doctor.kind_{r.kind}"),
                    "optimizer": self._optimizer_label(r),
                    "max |Δ|": r.moved,
                    "verdict": say("common", f"doctor.verdict_{verdicts[r.name][0]}"),
                }
                for r in self._params.values()
            ],
            title=say("common", "doctor.title"),
        )
        self._verdicts = verdicts
        # the graph, the cuts' inputs and the parameters' copies are not needed any more
        self._origin, self._cuts, self._reach_cache = {}, [], {}

    def _verdict(self, r: _Parameter) -> tuple[str, str, Location | None]:
        def verdict(cause: str, location: Location | None = None, **values: Any):
            return cause, say("common", f"doctor.{cause}", **values), location

        if not (r.trainable and r.tensor.requires_grad):  # frozen before the step, or in it
            return verdict("frozen")
        if r.incoming is None:
            return self._why_no_gradient(r, verdict)
        kind = r.kind
        if kind in ("NaN", "inf"):
            node, origin = self._first_nonfinite or ("?", None)
            return verdict("nonfinite", origin, kind=kind, node=node)
        wrong = [b for b in self._backwards if id(r.tensor) in b.get("wrong_handoff", ())]
        if wrong:
            return verdict("wrong_handoff", wrong[0]["at"])
        if r.leftover:
            return verdict("leftover", r.leftover_at)
        steps = [s for s in self._steps if id(r.tensor) in s.held]
        if not steps:
            if not self._steps:
                return verdict("no_step")
            mine = set(self._params)
            if all(not (s.held & mine) for s in self._steps):
                first = self._steps[0]
                return verdict(
                    "other_model",
                    first.location,
                    optimizer=type(first.optimizer).__name__,
                    count=len(first.held),
                )
            return verdict("not_in_optimizer", self._steps[0].location)
        if kind == "zeros":
            return verdict("zero_gradient")
        if all(id(r.tensor) in s.cleared for s in steps):
            return verdict("cleared_before_step", steps[0].location)
        if r.moved == 0:
            lrs = sorted(
                {
                    g["lr"]
                    for s in steps
                    for g in s.optimizer.param_groups
                    if any(p is r.tensor for p in g["params"]) and "lr" in g
                }
            )
            if lrs and not any(lrs):
                return verdict("not_moved", steps[0].location, lr=", ".join(map(str, lrs)))
            largest = float(r.incoming.abs().max())
            return verdict(
                "rounded_away",
                steps[0].location,
                largest=f"{largest:.1e}",
                dtype=str(r.tensor.dtype).removeprefix("torch."),
            )
        if r.accumulated:
            return verdict("accumulated", None, count=r.accumulated + 1)
        return verdict("learned")

    def _why_no_gradient(self, r: _Parameter, verdict: Any) -> tuple[str, str, Location | None]:
        failed = next((b for b in self._backwards if "error" in b), None)
        if not self._backwards and self.error is None:
            return verdict("no_backward")
        reached_by_graph = [b for b in self._backwards if not b["no_graph"]]
        cut = self._first_cut(r, intentional=False)
        cut_text = self._describe(cut) if cut is not None else ""
        if self._backwards and not reached_by_graph:
            flagged = next(b["flagged"] for b in self._backwards if b["no_graph"])
            real = say("common", "doctor.real_cut", cut=cut_text) if cut is not None else ""
            return verdict("loss_flag", flagged, real_cut=real)
        if cut is not None:
            where = cut.grad_off_at if cut.grad_off_at is not None else cut.location
            return verdict("cut", where, how=cut_text)
        if failed is not None or self.error is not None:
            error = failed["error"] if failed is not None else self.error
            where = failed["at"] if failed is not None else self._error_at
            return verdict("stopped", where, error=_error_line(error))
        handoff = self._first_cut(r, intentional=True)
        if handoff is not None:
            return verdict("handoff_not_called", handoff.location)
        if r.first_use is None:
            module = r.name.rpartition(".")[0]
            if module and module in self._modules and module not in self._called:
                return verdict("module_not_called", module=module)
            return verdict("unused")
        return verdict("not_reaching_loss", r.first_use)

    def _first_cut(self, r: _Parameter, *, intentional: bool) -> _Cut | None:
        """The first cut r's values went through: a hand-off cut of split learning (`intentional`,
        a leaf that requires grad made from the same values) or any other."""
        for cut in self._cuts:
            if any(t is r.tensor or id(r.tensor) in self._reach(t) for t in cut.inputs):
                if self._is_handoff(cut) == intentional:
                    return cut
        return None

    def _is_handoff(self, cut: _Cut) -> bool:
        return any(
            leaf.shape == t.shape and torch.equal(leaf.detach(), t.detach())
            for t in cut.inputs
            for leaf in self._handoff_leaves
        )

    def _reach(self, t: torch.Tensor) -> frozenset[int]:
        """The ids of the leaves t's graph leads back to."""
        if t.grad_fn is None:
            return frozenset({id(t)})
        found: set[int] = set()
        todo, seen = [t.grad_fn], set()
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if node in self._reach_cache:
                found |= self._reach_cache[node]
                continue
            variable = getattr(node, "variable", None)
            if variable is not None:
                found.add(id(variable))
            todo.extend(next_node for next_node, _ in node.next_functions)
        self._reach_cache[t.grad_fn] = frozenset(found)
        return self._reach_cache[t.grad_fn]

    def _describe(self, cut: _Cut) -> str:
        if cut.inference:
            return say("common", "doctor.how_inference", call=cut.call)
        if cut.grad_off_at is not None or cut.decorated is not None:
            if cut.decorated:
                return say("common", "doctor.how_decorated", function=cut.decorated)
            where = cut.grad_off_at.label if cut.grad_off_at else "?"
            return say("common", "doctor.how_no_grad", call=cut.call, where=where)
        if cut.call == "data":
            return say("common", "doctor.how_data")
        if cut.call == "detach":
            return say("common", "doctor.how_detach")
        if cut.call == "tensor":
            return say("common", "doctor.how_tensor")
        if cut.call in _CALLS_TO_PYTHON:
            return say("common", "doctor.how_python", call=cut.call)
        if cut.dtype is not None and not (cut.dtype.is_floating_point or cut.dtype.is_complex):
            dtype = str(cut.dtype).removeprefix("torch.")
            return say("common", "doctor.how_integer", call=cut.call, dtype=dtype)
        return say("common", "doctor.how_other", call=cut.call)

    def _optimizer_label(self, r: _Parameter) -> str:
        names = []
        for s in self._steps:
            label = type(s.optimizer).__name__
            if id(r.tensor) in s.held and label not in names:
                names.append(label)
        return ", ".join(names) if names else say("common", "doctor.none")

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
        return self._verdicts[name][0]

    def where(self, name: str) -> Location | None:
        """The line of the learner's code behind parameter `name`'s verdict, if there is one."""
        self.cause(name)
        return self._verdicts[name][2]

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
        if self.healthy:
            return say("common", "doctor.healthy", count=len(self._params))
        return say("common", "doctor.unhealthy", count=len(self.problems))

    def __repr__(self) -> str:
        if self._state != "done":
            return f"<doctor checkup: {self._state}>"
        lines = [repr(self.rows), "", self.summary()]
        lines += [f"- {f}" for f in self.findings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        import re

        def text(value: str) -> str:  # `code` in a message is shown as code
            return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(value))

        if self._state != "done":
            return html.escape(repr(self))
        items = []
        for f in self.findings:
            where = ""
            if f.location is not None:
                where = (
                    f"<br><small>{html.escape(f.location.label)}</small> "
                    f"<code>{html.escape(f.location.code)}</code>"
                )
            mark = "⚠️" if f.problem else "ℹ️"
            items.append(
                f"<li>{mark} <b>{html.escape(', '.join(f.parameters))}</b>: "
                f"{text(f.message)}{where}</li>"
            )
        listing = f"<ul>{''.join(items)}</ul>" if items else ""
        return f"{self.rows._repr_html_()}<p>{html.escape(self.summary())}</p>{listing}"


def _is_property(name: str, args: tuple) -> bool:
    """A property read (`.grad`, `.shape`): torch reports it as a call, but it is not one."""
    return bool(args) and isinstance(args[0], torch.Tensor) and name in _PROPERTIES


_PROPERTIES = {
    name
    for name in dir(torch.Tensor)
    if isinstance(getattr(torch.Tensor, name, None), property)
    or type(getattr(torch.Tensor, name, None)).__name__ == "getset_descriptor"
}


def _error_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _finite(grads: Any) -> bool:
    """No NaN or inf in any of these gradients. A sum is one pass over each; it can overflow only
    where the entries are near float's largest value, and then it only changes which backward
    function is named: the verdict itself reads the parameters' gradients entry by entry."""
    return all(
        bool(torch.isfinite(g.sum())) for g in grads if isinstance(g, torch.Tensor) and g.numel()
    )


def _gradient_kind(grad: torch.Tensor | None) -> str:
    if grad is None:
        return "None"
    if not torch.isfinite(grad).all():
        return "NaN" if torch.isnan(grad).any() else "inf"
    if not grad.any():
        return "zeros"
    return "finite"


def _moved(r: _Parameter) -> float:
    now = r.tensor.detach()
    if now.shape != r.before.shape:
        return math.nan
    return float((now - r.before).abs().max()) if now.numel() else 0.0


def doctor(model: object) -> Checkup:
    """A checkup of one training step of `model` (an `nn.Module`, or a dict of name -> tensor):
    `with doctor(model) as checkup: <the step>`, then show `checkup`."""
    example = "with doctor(model) as checkup: <one training step>"
    if isinstance(model, Checkup):
        raise TypeError(f"doctor() got a checkup, not a model; {example}")
    named = naming.named_tensors(model, "doctor()", example=example)
    if not named:
        raise ValueError(f"doctor() got a model with no parameters, nothing to check; {example}")
    modules = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    modules.pop("", None)
    return Checkup(named, modules)
