"""What the doctor records while one training step runs: the torch calls, the parameters'
gradients as they arrive, the backward calls, the optimizer steps, the cuts, the first NaN or inf.

How it knows: while the block runs, a torch function mode (`torch.overrides.TorchFunctionMode`)
sees every torch call the step makes, with the line of your code that made it. A call whose
inputs require grad and whose result does not (`.detach()`, `.data`, `torch.tensor(...)`, an
integer cast, `.item()`, any operation under `torch.no_grad()`) is a *cut*; a parameter that got
no gradient is explained by the first cut its values went through. Hooks on the parameters see
each gradient arrive (and whether an old one was waiting in `.grad`), a global optimizer hook
sees which optimizer stepped and what it held, and hooks on the backward functions find the first
one that produced a NaN or an infinity (in the forward pass, the watch finds the first call that
made one from finite values). `torch.autograd.backward`, which torch shows to a mode
only from release 2.11 on, has a stand-in while the block runs: it writes the call down and makes
it. Nothing is changed: the step computes, warns and compiles as it would without the doctor
(`helpers.doctor.watching`).

A `Recorder` fills a `Record`; the verdicts (`helpers.doctor.verdicts`) are computed from it.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from helpers.doctor.watching import bare_anomaly_traceback, call, callers_frame, grad_fn, hide
from helpers.language import say

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


def is_learners(frame: Any) -> bool:
    code = frame.f_code
    known = _IS_LEARNERS.get(id(code))
    if known is not None and known[0] is code:
        return known[1]
    if len(_IS_LEARNERS) >= 4096:
        _IS_LEARNERS.clear()
    learners = is_learners_code(code, frame.f_globals.get("__name__", ""))
    _IS_LEARNERS[id(code)] = (code, learners)
    return learners


def is_learners_code(code: Any, module: str) -> bool:
    """Whether code object `code` of module `module` is the learner's (see `is_learners`)."""
    return not (
        module.partition(".")[0] in _NOT_LEARNER_MODULES
        or code.co_filename.startswith(_LIBRARY_DIRS)
    )


#: Whether a code object is the learner's, once asked (the watchers ask on every torch call):
#: by the code's id, which the code kept in the entry holds. Not by the code itself: hashing a
#: code object hashes its bytecode and constants, as dear as the rest of the question, and code
#: objects compare equal across files.
_IS_LEARNERS: dict[int, tuple[Any, bool]] = {}


#: Calls that leave torch for a Python value: a cut, though they return no tensor.
CALLS_TO_PYTHON = {"item", "tolist", "numpy", "__float__", "__int__", "__index__"}
#: Calls that make a tensor from Python values: what left torch through a Python-value cut (the
#: doctor cannot follow a Python number) may come back through one of them.
FROM_PYTHON = {"tensor", "as_tensor", "from_numpy", "asarray"}
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


def _learner_location() -> Location | None:
    """The innermost frame of the learner's code on the stack (not torch, helpers or Python's).
    The walk starts at its caller's frame: every frame of the doctor and of torch between there
    and the learner's line is skipped, so no caller has to count how deep it is called."""
    frame = sys._getframe(1)
    while frame is not None:
        if is_learners(frame):
            return Location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def _decorated_function() -> str | None:
    """The function a grad-mode decorator wraps, when the grad mode was switched by one (the walk
    starts at its caller's frame and stops at the learner's)."""
    frame = sys._getframe(1)
    while frame is not None:
        # torch's decorator wrapper (its frame is renamed after the grad mode from torch 2.15)
        in_wrapper = frame.f_globals.get("__name__") == "torch.utils._contextlib"
        if in_wrapper and "func" in frame.f_locals:
            return getattr(frame.f_locals["func"], "__name__", None)
        if is_learners(frame):
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
class Cut:
    """A call whose inputs required grad and whose result does not."""

    call: str
    location: Location | None
    inputs: list[torch.Tensor]
    grad_off_at: Location | None = None
    decorated: str | None = None
    inference: bool = False
    dtype: torch.dtype | None = None


@dataclass
class Made:
    """A call of the block that made a NaN or an infinity from finite values."""

    call: str
    location: Location | None
    kind: str  # "NaN" or "inf"
    node: Any  # the backward function of its result (None when it has no graph)


@dataclass
class Step:
    """One `optimizer.step()` the block made."""

    optimizer: torch.optim.Optimizer
    location: Location | None
    held: set[int]
    cleared: set[int]


@dataclass
class Backward:
    """One `backward()` call the block made."""

    at: Location | None
    #: the root has no graph: it requires grad only as it was flagged by hand (`flagged`: where)
    no_graph: bool = False
    flagged: Location | None = None
    #: the parameters a hand-off with another leaf's gradient (split learning's bug) reaches
    wrong_handoff: frozenset[int] = frozenset()
    error: BaseException | None = None
    #: the cuts (by position in `Record.cuts`) whose results the root was computed from: the cuts
    #: on this loss's path
    through_cuts: frozenset[int] = frozenset()
    #: "NaN" or "inf" when a root's value already held one (the forward pass made it), with the
    #: backward functions of that root's graph; "" when every root was finite
    root_kind: str = ""
    root_graph: frozenset[Any] = frozenset()


@dataclass
class ParameterRecord:
    """One parameter of the model, and what happened to it in the block."""

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
    #: whose gradient the leftover was: "before" (in .grad when the block began) or "stepped"
    leftover_from: str = ""
    accumulated: int = 0
    first_use: Location | None = None
    #: where the block cleared a gradient that had arrived and was not stepped yet (the line of
    #: `zero_grad()`, or of `p.grad = None`), as the doctor saw it happen
    cleared_at: Location | None = None
    #: a `helpers.doctor.unregistered.Unregistered` when the model holds this tensor without
    #: registering it (how, in which attribute, made at which line); None for a parameter
    unregistered: Any = None
    #: None arrived as its gradient (a custom Function's backward may return None for an input),
    #: from which backward function, and where that Function's `backward` is written
    none_arrived: bool = False
    none_from: str = "?"
    none_written: Location | None = None
    #: the sum of the gradients torch.autograd.grad handed back for it (they pass its hook, but
    #: not into .grad), and the line of the first such call
    returned: torch.Tensor | None = None
    returned_at: Location | None = None


@dataclass
class Record:
    """Everything one block did, as the doctor saw it: what the verdicts are computed from."""

    parameters: dict[int, ParameterRecord] = field(default_factory=dict)  # by id of the tensor
    modules: dict[str, torch.nn.Module] = field(default_factory=dict)
    called: set[str] = field(default_factory=set)  # the modules whose forward ran
    cuts: list[Cut] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    backwards: list[Backward] = field(default_factory=list)
    handoff_leaves: list[torch.Tensor] = field(default_factory=list)
    #: the backward function that first produced a NaN or inf, and the line that made it
    first_nonfinite: tuple[str, Location | None] | None = None
    #: the first calls of the block (at most `MADE_KEPT`) that made a NaN or inf from finite values
    made_nonfinite: list[Made] = field(default_factory=list)
    error: BaseException | None = None  # what the block raised
    error_at: Location | None = None  # the innermost line of the learner's code it passed


def backward_functions(roots: Sequence[Any]) -> Iterator[Any]:
    """Every backward function reachable from `roots` (grad_fn objects, None skipped), each once."""
    seen, todo = set(), list(roots)
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        yield node
        todo.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))


def reach(t: torch.Tensor, cache: dict[Any, frozenset[int]]) -> frozenset[int]:
    """The ids of the leaves t's graph leads back to (`cache`: by backward function)."""
    root = grad_fn(t)
    if root is None:
        return frozenset({id(t)})
    found: set[int] = set()
    todo, seen = [root], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node in cache:
            found |= cache[node]
            continue
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.add(id(variable))
        todo.extend(next_node for next_node, _ in node.next_functions)
    cache[root] = frozenset(found)
    return cache[root]


class _Watch(TorchFunctionMode):
    """Sees every torch call of the block and tells the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if torch.compiler.is_compiling():  # torch.compile traces this: it compiles torch's call
            return func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        recorder = self.recorder
        caller = callers_frame(sys._getframe(1))
        if recorder._busy or recorder._in_backward:  # the doctor's own arithmetic, in a hook,
            return call(func, args, kwargs, caller)  # or the backward pass: not the learner's step
        name = _call_name(func)  # a backward reaches the recorder through its stand-in (start())
        if name == "_set_grad_enabled" and args and args[0] is False:
            recorder._grad_off = (_learner_location(), _decorated_function())
        # torch.autograd.grad hands its gradients back: they pass the parameters' hooks, yet none
        # arrives in .grad
        recorder._handed_back = func is torch.autograd.grad
        try:
            result = call(func, args, kwargs, caller)
        finally:
            recorder._handed_back = False
        bare_anomaly_traceback(result, caller)
        if not recorder._in_step:
            recorder._saw(name, args, kwargs, result)
        return result


hide(_Watch.__torch_function__)


class Recorder:
    """Watches one block (`start()` ... `stop()`) and fills `record`; changes nothing."""

    def __init__(
        self,
        named: dict[str, torch.Tensor],
        modules: dict[str, torch.nn.Module],
        unregistered: Sequence[Any] = (),  # helpers.doctor.unregistered.Unregistered
    ):
        self._named = named
        self._modules = modules
        self._unregistered = list(unregistered)
        self.record: Record  # filled from start() to stop()

    def start(self) -> None:
        """Hooks on, the watch on: from here every call of the block is seen."""
        self.record = Record(modules=self._modules)
        self._handles: list[Any] = []
        self._flagged: dict[int, Location | None] = {}
        self._grad_off: tuple[Location | None, str | None] = (None, None)
        self._in_step = False
        self._busy = False
        self._handed_back = False  # inside torch.autograd.grad
        self._in_backward = False
        self._origin: dict[Any, Location | None] = {}
        self._reach_cache: dict[Any, frozenset[int]] = {}
        #: id of a tensor made from a cut's result -> (a weak reference to it, those cuts)
        self._from_cut: dict[int, tuple[Any, frozenset[int]]] = {}
        self._left_torch: frozenset[int] = frozenset()  # the Python-value cuts so far
        for name, tensor in self._named.items():
            self._watch_parameter(name, tensor)
        for held in self._unregistered:
            self._watch_parameter(held.name, held.tensor, unregistered=held)
        for name, module in self._modules.items():
            self._handles.append(
                module.register_forward_pre_hook(lambda *_, name=name: self.record.called.add(name))
            )
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles.append(register_optimizer_step_pre_hook(self._step_begins))
        self._handles.append(register_optimizer_step_post_hook(self._step_ends))
        self._mode = _Watch(self)
        self._mode.__enter__()
        # every backward goes through torch.autograd.backward (Tensor.backward calls it), which
        # torch shows to the watch only from release 2.11 on: the recorder stands in for it while
        # the block runs, so every release is followed alike
        self._replaced = torch.autograd.backward
        torch.autograd.backward = self._autograd_backward

    def stop(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Record:
        """The watch off, every hook removed; the record, with the error the block raised."""
        torch.autograd.backward = self._replaced
        self._mode.__exit__(None, None, None)  # a mode's exit does not look at the error
        for handle in self._handles:
            handle.remove()
        self.record.error = exc
        self.record.error_at = None
        while tb is not None:  # the innermost line of the learner's code the error passed
            if is_learners(tb.tb_frame):
                self.record.error_at = Location(
                    tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name
                )
            tb = tb.tb_next
        return self.record

    def forget(self) -> None:
        """Lets go of the graph and the cuts' inputs once the verdicts are given."""
        self._origin, self.record.cuts, self._reach_cache = {}, [], {}
        self._from_cut = {}

    def _watch_parameter(self, name: str, tensor: torch.Tensor, unregistered: Any = None) -> None:
        grad = _grad(tensor)
        parameter = ParameterRecord(
            name=name,
            tensor=tensor,
            before=tensor.detach().clone(),
            trainable=tensor.requires_grad,
            waiting="before" if grad is not None and grad.any() else "",
            unregistered=unregistered,
        )
        self.record.parameters[id(tensor)] = parameter
        # a tensor the model holds that is not a leaf (`torch.randn(1, requires_grad=True) * 0.1`)
        # has no .grad, but its gradient passes a hook on it as a leaf's does
        if tensor.requires_grad and (tensor.is_leaf or unregistered is not None):
            self._handles.append(tensor.register_hook(lambda g, p=parameter: self._arrives(p, g)))

    def _arrives(self, parameter: ParameterRecord, grad: torch.Tensor | None) -> None:
        if self._handed_back:  # torch.autograd.grad's: it passes the hook, but not into .grad
            if grad is not None:
                self._busy = True
                try:
                    self._record_returned(parameter, grad)
                finally:
                    self._busy = False
            return
        if grad is None:  # a custom Function's backward returned None for it: nothing arrives
            parameter.none_arrived = True
            return
        self._busy = True
        try:
            self._record_arrival(parameter, grad)
        finally:
            self._busy = False

    def _record_returned(self, p: ParameterRecord, grad: torch.Tensor) -> None:
        g = grad.detach()
        p.returned = g.clone() if p.returned is None else p.returned + g
        if p.returned_at is None:
            p.returned_at = _learner_location()

    def _record_arrival(self, p: ParameterRecord, grad: torch.Tensor) -> None:
        current = _grad(p.tensor)
        if current is not None and current.any():
            if p.waiting in ("before", "stepped") and not p.leftover:
                p.leftover = True
                p.leftover_from = p.waiting
                backwards = self.record.backwards
                p.leftover_at = backwards[-1].at if backwards else None
            elif p.waiting == "block":
                p.accumulated += 1
        p.waiting = "block"
        g = grad.detach()
        p.incoming = g.clone() if p.incoming is None else p.incoming + g

    def _autograd_backward(self, *args: Any, **kwargs: Any) -> Any:
        """torch.autograd.backward, as the learner calls it while the block runs."""
        if self._in_backward:  # Tensor.backward's own call, or torch's dispatch of this one
            return self._replaced(*args, **kwargs)
        return self._backward(args, kwargs)

    def _backward(self, args: tuple, kwargs: dict) -> Any:
        """`loss.backward(gradient)` or `torch.autograd.backward(losses, gradients)`: where, from
        which roots, through which cuts; a NaN watch on the roots' graphs while it runs."""
        pairs = _roots(args, kwargs)
        location = _learner_location()
        entry = Backward(at=location)
        flagged = [
            root
            for root, _ in pairs
            if root.grad_fn is None
            and root.requires_grad
            and id(root) not in self.record.parameters
        ]
        if pairs and len(flagged) == len(pairs):  # no root has a graph
            entry.no_graph = True
            entry.flagged = self._flagged.get(id(flagged[0]), location)
        entry.through_cuts = frozenset().union(*(self._cuts_behind(root) for root, _ in pairs))
        entry.wrong_handoff = frozenset().union(
            *(self._wrong_handoff(root, given) for root, given in pairs if given is not None)
        )
        self._busy = True
        try:
            kinds = {nonfinite_kind(root) for root, _ in pairs} - {""}
            if kinds:  # the forward pass made a NaN or inf: which call, the verdict finds out
                entry.root_kind = "NaN" if "NaN" in kinds else "inf"
                entry.root_graph = frozenset(
                    backward_functions([root.grad_fn for root, _ in pairs if nonfinite_kind(root)])
                )
        finally:
            self._busy = False
        self.record.backwards.append(entry)
        hooks = self._watch_nonfinite([root for root, _ in pairs])
        self._in_backward = True
        try:
            return self._replaced(*args, **kwargs)
        except Exception as err:
            entry.error = err
            raise
        finally:
            self._in_backward = False
            self._name_none_givers([root for root, _ in pairs])
            for handle in hooks:
                handle.remove()

    def _name_none_givers(self, roots: list[torch.Tensor]) -> None:
        """For each parameter that None arrived at, the backward function that feeds it."""
        waiting = {id(p.tensor): p for p in self.record.parameters.values() if p.none_arrived}
        for node in backward_functions([root.grad_fn for root in roots]):
            if not waiting:
                return
            for next_node, _ in node.next_functions:
                found = waiting.pop(id(getattr(next_node, "variable", None)), None)
                if found is not None:
                    found.none_from, found.none_written = node.name(), _backward_location(node)

    def _wrong_handoff(self, root: torch.Tensor, gradient: torch.Tensor) -> frozenset[int]:
        """When `root.backward(leaf.grad)` is handed the gradient of a cut leaf whose values are not
        root's (split learning's wrong hand-off), the parameters root's graph reaches."""
        for leaf in self.record.handoff_leaves:
            grad = leaf.grad  # handed back as is, or as a copy (a clone, or one sent over a wire)
            if grad is gradient or (
                grad is not None and grad.shape == gradient.shape and torch.equal(grad, gradient)
            ):
                same = leaf.shape == root.shape and torch.equal(leaf.detach(), root.detach())
                if not same and root.grad_fn is not None:
                    return reach(root, self._reach_cache)
                return frozenset()
        return frozenset()

    def _watch_nonfinite(self, roots: list[torch.Tensor]) -> list[Any]:
        """A hook on every backward function of the roots' graph: the first to output a NaN or
        inf from finite gradients is the one that produced it."""
        handles = []
        for node in backward_functions([root.grad_fn for root in roots]):
            if type(node).__name__ == "AccumulateGrad":
                continue

            def check(grad_inputs, grad_outputs, node=node):
                if self.record.first_nonfinite is not None:
                    return
                self._busy = True
                try:
                    if not _finite(grad_inputs) and _finite(grad_outputs):
                        self.record.first_nonfinite = (node.name(), self._origin.get(node))
                finally:
                    self._busy = False

            handles.append(node.register_hook(check))
        return handles

    def _cuts_behind(self, t: torch.Tensor) -> frozenset[int]:
        """The cuts whose results t was computed from (as far as torch calls show)."""
        found = self._from_cut.get(id(t))
        return found[1] if found is not None and found[0]() is t else frozenset()

    def _carry_cuts(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        """What a call makes from a cut's result comes from that cut too."""
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        behind = frozenset().union(*(self._cuts_behind(t) for t in inputs))
        if not inputs and name in FROM_PYTHON:
            behind = self._left_torch
        if behind:
            self._mark(result, behind)

    def _mark(self, result: Any, cuts: frozenset[int]) -> None:
        for t in tree_leaves(result):
            if isinstance(t, torch.Tensor):
                cuts = cuts | self._cuts_behind(t)
                self._from_cut[id(t)] = (weakref.ref(t), cuts)

    def _set_by_hand(self, tensor: Any, grad: torch.Tensor) -> None:
        """`p.grad = g` (gradients from torch.autograd.grad, meta-learning, functional code): a
        gradient arrives in .grad as surely as through backward()."""
        parameter = self.record.parameters.get(id(tensor))
        if parameter is not None:
            parameter.incoming = grad.detach().clone()
            parameter.waiting = "block"

    def _clears(self, name: str, args: tuple) -> None:
        """`p.grad = None` or `p.grad.zero_()` (what zero_grad() does) on a gradient that arrived
        in the block and no step used yet: where it happened."""
        if not args or not isinstance(args[0], torch.Tensor):
            return
        if name == "grad=" and (len(args) < 2 or args[1] is None):
            found = self.record.parameters.get(id(args[0]))
        elif name == "zero_":
            found = next(
                (p for p in self.record.parameters.values() if _grad(p.tensor) is args[0]), None
            )
        else:
            return
        if found is not None and found.waiting == "block" and found.cleared_at is None:
            found.cleared_at = _learner_location()

    def _saw(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        self._carry_cuts(name, args, kwargs, result)
        if name in ("grad=", "zero_"):
            self._clears(name, args)
        if name == "grad=" and len(args) > 1 and isinstance(args[1], torch.Tensor):
            self._set_by_hand(args[0], args[1])
        if name == "requires_grad=":
            if len(args) > 1 and args[1] is True and isinstance(args[0], torch.Tensor):
                self._flagged[id(args[0])] = _learner_location()
                self.record.handoff_leaves.append(args[0])
            return
        if name == "requires_grad_" and isinstance(result, torch.Tensor) and result.is_leaf:
            if result.requires_grad and id(result) not in self.record.parameters:
                self._flagged[id(result)] = _learner_location()
                self.record.handoff_leaves.append(result)
            return
        if name in _NOT_OPERATIONS or (name != "data" and _is_property(name, args)):
            return
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if len(self.record.made_nonfinite) < MADE_KEPT:
            self._made_nonfinite(name, inputs, result)
        for t in inputs:
            parameter = self.record.parameters.get(id(t))
            if parameter is not None and parameter.first_use is None:
                parameter.first_use = _learner_location()
        if not any(t.requires_grad for t in inputs):
            return
        outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        if any(t.requires_grad for t in outputs):
            for t in outputs:
                node = grad_fn(t)
                if node is not None and node not in self._origin:
                    self._origin[node] = _learner_location()
            return
        if not outputs and name not in CALLS_TO_PYTHON:
            return
        if not torch.is_grad_enabled() and _in_custom_function():
            return  # a custom Function's forward runs with grad off; its backward is the learner's
        grad_off_at, decorated = (None, None)
        if not torch.is_grad_enabled():
            grad_off_at, decorated = self._grad_off
        index = frozenset({len(self.record.cuts)})
        if outputs:
            self._mark(result, index)
        else:  # a Python value: it may come back through torch.tensor(...) and the like
            self._left_torch |= index
        self.record.cuts.append(
            Cut(
                call=name,
                location=_learner_location(),
                inputs=[t for t in inputs if t.requires_grad],
                grad_off_at=grad_off_at,
                decorated=decorated,
                inference=torch.is_inference_mode_enabled(),
                dtype=outputs[0].dtype if outputs else None,
            )
        )

    def _made_nonfinite(self, name: str, inputs: list[torch.Tensor], result: Any) -> None:
        """Writes the call down when its result holds a NaN or inf and its inputs hold none."""
        self._busy = True
        try:
            outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
            kinds = {nonfinite_kind(t) for t in outputs} - {""}
            if not kinds or any(nonfinite_kind(t) for t in inputs):
                return
            node = next(
                (t.grad_fn for t in outputs if nonfinite_kind(t) and t.grad_fn is not None), None
            )
            kind = "NaN" if "NaN" in kinds else "inf"
            self.record.made_nonfinite.append(Made(name, _learner_location(), kind, node))
        finally:
            self._busy = False

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
        parameters = self.record.parameters
        for key in held & parameters.keys():
            parameter = parameters[key]
            grad = parameter.tensor.grad
            holds = grad is not None and bool(grad.any())
            if parameter.incoming is not None and not holds:
                cleared.add(key)  # a zero gradient that arrived as zeros is told apart later
            if holds:
                parameter.waiting = "stepped"
        self.record.steps.append(Step(optimizer, _learner_location(), held, cleared))

    def _step_ends(self, *_: Any) -> None:
        self._in_step = False


def _backward_location(node: Any) -> Location | None:
    """Where a custom Function's `backward` is written (None for torch's own functions)."""
    code = getattr(getattr(getattr(node, "_forward_cls", None), "backward", None), "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno  # a decorator's line, when there is one: the `def` comes after
    defined = (n for n in range(first, len(lines) + 1) if lines[n - 1].lstrip().startswith("def "))
    return Location(code.co_filename, next(defined, first), code.co_name)


def _in_custom_function() -> bool:
    """Whether this call is made inside the forward of a `torch.autograd.Function`: torch runs
    that forward with grad off, and the Function's own backward stands for everything in it, so
    nothing there is a cut. On torch 2.13 and older `Function.apply` is a Python frame on the
    stack; on 2.15 it is C++, so the forward's own code is looked for among Functions' forwards."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "apply" and frame.f_globals.get("__name__") == _FUNCTION_MODULE:
            return True
        if code.co_name == "forward" and _is_function_forward(code):
            return True
        frame = frame.f_back
    return False


_FUNCTION_MODULE = torch.autograd.function.__name__
#: The code of every custom Function's `forward` seen so far (code object -> whether it is one).
_FUNCTION_FORWARDS: dict[Any, bool] = {}


def _is_function_forward(code: Any) -> bool:
    """Whether `code` is the `forward` of a `torch.autograd.Function` subclass (asked again of
    torch's subclasses only for code not seen before, so a loop pays once)."""
    known = _FUNCTION_FORWARDS.get(code)
    if known is None:
        if len(_FUNCTION_FORWARDS) >= 4096:
            _FUNCTION_FORWARDS.clear()
        pending, forwards = [torch.autograd.Function], set()
        while pending:
            cls = pending.pop()
            pending.extend(cls.__subclasses__())
            forward = getattr(cls.__dict__.get("forward"), "__func__", cls.__dict__.get("forward"))
            if forward is not None and hasattr(forward, "__code__"):
                forwards.add(forward.__code__)
        known = _FUNCTION_FORWARDS[code] = code in forwards
    return known


def _roots(args: tuple, kwargs: dict) -> list[tuple[torch.Tensor, Any]]:
    """The tensors a backward call starts from, each with the gradient handed with it (or None):
    `torch.autograd.backward(tensors, grad_tensors)`, where either may be one tensor or a
    sequence (`root.backward(gradient)` calls it so)."""
    roots = args[0] if args else kwargs.get("tensors")
    gradients = args[1] if len(args) > 1 else kwargs.get("grad_tensors")
    roots = [roots] if isinstance(roots, torch.Tensor) else list(roots or ())
    gradients = [gradients] if isinstance(gradients, torch.Tensor) else list(gradients or ())
    return [
        (root, gradient if isinstance(gradient, torch.Tensor) else None)
        for root, gradient in zip_longest(roots, gradients)  # None where none was handed
        if isinstance(root, torch.Tensor)
    ]


def _is_property(name: str, args: tuple) -> bool:
    """A property read (`.grad`, `.shape`): torch reports it as a call, but it is not one."""
    return bool(args) and isinstance(args[0], torch.Tensor) and name in _PROPERTIES


_PROPERTIES = {
    name
    for name in dir(torch.Tensor)
    if isinstance(getattr(torch.Tensor, name, None), property)
    or type(getattr(torch.Tensor, name, None)).__name__ == "getset_descriptor"
}


def _finite(grads: Any) -> bool:
    """No NaN or inf in any of these gradients. A sum is one pass over each; it can overflow only
    where the entries are near float's largest value, and then it only changes which backward
    function is named: the verdict itself reads the parameters' gradients entry by entry."""
    return all(
        bool(torch.isfinite(g.sum())) for g in grads if isinstance(g, torch.Tensor) and g.numel()
    )


#: How many calls that made a NaN or inf from finite values the record keeps: the verdict wants
#: the first on the loss's path, and a block that makes more is broken before the last of them.
MADE_KEPT = 8


def _grad(t: torch.Tensor) -> torch.Tensor | None:
    """`t.grad`, read only where there is one to read: a tensor that is not a leaf has none, and
    torch warns when its .grad is read."""
    return t.grad if t.is_leaf else None


def nonfinite_kind(t: torch.Tensor) -> str:
    """What t holds that is not finite: "NaN" (first), "inf", or "" for none, and for a tensor
    whose values cannot be read here (not floating; inside a transform such as torch.func.vmap,
    where a value cannot decide a branch). A sum is one pass; only a sum that is not finite is
    looked at entry by entry (a sum of large finite values can overflow)."""
    if not (t.dtype.is_floating_point or t.dtype.is_complex) or t.is_sparse or not t.numel():
        return ""
    if t.device.type == "meta":
        return ""
    values = t.detach()
    try:
        if bool(torch.isfinite(values.sum())):
            return ""
        if bool(torch.isnan(values).any()):
            return "NaN"
        return "inf" if bool(torch.isinf(values).any()) else ""
    except RuntimeError:  # a value inside a transform: it decides no branch
        return ""
