"""What the explainer writes down while it is on: the few facts an error's cause needs later.

A torch function mode (`torch.overrides.TorchFunctionMode`) sees every torch call with its
arguments. For most calls the watch only notes, on the backward function the result gets, the
line of the learner's code that made it (in the node's own `metadata`, as anomaly mode keeps its
traceback there). It writes more for a few kinds of call:

- an in-place call (`mul_`, `h[0] = 0`, `copy_`, an `out=` argument): the tensor's version before
  and after, what made the tensor (its `grad_fn` then), and the line;
- an optimizer's `step()`, as one call (torch's global optimizer-step hooks): the same, for each
  parameter, gradient and state tensor the step changed, with the learner's line of the step.
  The calls torch's optimizer code makes inside the step (an Adam step makes about twenty per
  parameter) are only made, not looked at; a call from the learner's code inside the step (a
  closure's, as `LBFGS` runs one, or a step hook's) is watched as ever, and so is every call of
  an optimizer whose `step` the learner wrote. A step that raises leaves the watch looking at
  every call again from the learner's next call on;
- a backward (`loss.backward()`, `torch.autograd.backward`, `torch.autograd.grad`): the line and
  the graph it started from, so a later "backward through the graph a second time" can name the
  backward that freed what the failing one needs;
- a cut: a call whose tensor inputs require grad and whose result does not (`.item()`, `.numpy()`,
  `.detach()`, an integer `argmax`, anything under `no_grad`), with the line, so that "element 0 of
  tensors does not require grad" can name where the graph stopped.

Each list keeps only its last entries, so a long training loop holds no more than a few hundred
small records. Nothing is changed: every call computes, warns and leaves anomaly mode's traceback
as it would without the watch (`helpers.doctor.watching`), and under `torch.compile` the watch
steps aside. The optimizer-step hooks are registered while a watch is on, and removed when the
last one is off; a step on a thread whose mode stack holds no watch passes them at once.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.overrides import TorchFunctionMode

from helpers.doctor.record import Location, is_learners, is_learners_code
from helpers.doctor.watching import bare_anomaly_traceback, call, callers_frame, grad_fn, hide

__all__ = ["Backward", "Cut", "InPlace", "Watch", "learner_location", "made_at"]

#: The key under which a backward function's `metadata` holds the line that made it.
MADE_AT = "helpers.explain.made_at"
#: How many of each kind of record are kept (the latest).
KEPT = 256
#: How many backwards are kept: each holds its graph's nodes (not their saved tensors, which
#: that backward freed), and the one a failing backward needs is almost always the last.
BACKWARDS_KEPT = 4
#: Calls that leave torch for a Python value: a cut, though they return no tensor.
TO_PYTHON = {"item", "tolist", "numpy", "__float__", "__int__", "__index__", "__bool__"}
#: Calls the watch never counts as a cut (they compute nothing a gradient could flow through).
#: Named like in-place calls, but they change no values (no version bump).
_NOT_INPLACE = frozenset({"requires_grad_", "share_memory_"})
#: Reading or setting a tensor's attribute (`p.grad`, `x.T`): never in place, never a cut.
_ATTRIBUTES = frozenset({"__get__", "__set__"})
#: The calls of torch's profiler marks (`record_function`), which every optimizer step and
#: `zero_grad` makes: they touch no tensor.
_PROFILER = frozenset(
    {"_record_function_enter", "_record_function_enter_new", "_record_function_exit",
     "_record_function_exit._RecordFunction"}
)  # fmt: skip
_NOT_CUTS = {"backward", "register_hook", "retain_grad", "requires_grad_", "__set__", "__get__"}
#: The file of torch's activation checkpointing: a reentrant checkpoint runs its function with
#: gradients off, and its result requires grad only when one of its inputs does.
_CHECKPOINT_FILE = ("torch", "utils", "checkpoint.py")


def learner_location(frame: Any) -> Location | None:
    """The innermost frame of the learner's code from `frame` outwards (not torch's, not the
    course's, not an installed package's)."""
    while frame is not None:
        if is_learners(frame):
            code = frame.f_code
            key = (id(code), frame.f_lasti)
            known = _LOCATIONS.get(key)
            if known is None or known[0] is not code:
                if len(_LOCATIONS) >= KEPT * 16:
                    _LOCATIONS.clear()
                location = Location(code.co_filename, frame.f_lineno, code.co_name)
                known = _LOCATIONS[key] = (code, location)
            return known[1]
        frame = frame.f_back
    return None


#: Each call site's line once made, by the id of its code (which the entry holds, so the id
#: stays its) and the offset of its call instruction: reading a frame's line decodes its code's
#: line table, and the watch asks for the line of every call that builds the graph.
_LOCATIONS: dict[tuple[int, int], tuple[Any, Location]] = {}


def inside_checkpoint(frame: Any) -> bool:
    """Whether torch's checkpointing is among the frames from `frame` out to the learner's."""
    while frame is not None and not is_learners(frame):
        if frame.f_code.co_filename.replace("\\", "/").endswith("/".join(_CHECKPOINT_FILE)):
            return True
        frame = frame.f_back
    return False


def made_at(node: Any) -> Location | None:
    """The line of the learner's code that made backward function `node`, if the watch saw it."""
    metadata = getattr(node, "metadata", None)
    return metadata.get(MADE_AT) if isinstance(metadata, dict) else None


class InPlace(NamedTuple):  # a tuple: made on every in-place call, it must be cheap to make
    """One in-place call: on what, from which version to which, where."""

    call: str
    shape: tuple[int, ...]
    made_by: str  # the name of the tensor's grad_fn before the call ("" for a leaf)
    storage: int  # the data pointer of its storage: a view and its base share it
    version_before: int
    version_after: int
    at: Location | None
    tensor: weakref.ref  # the tensor itself, while it lives
    backwards: int  # how many backwards the watch had seen before this call


@dataclass(frozen=True)
class Backward:
    """One backward the learner's code started: where, and from which graph."""

    call: str
    at: Location | None
    roots: tuple[Any, ...]  # the roots' grad_fn (None for a root without one)
    retain_graph: bool
    count: int = 0  # how many backwards the watch had seen before this one
    newest: int = -1  # the sequence number of the newest root's grad_fn: nodes up to it came first


@dataclass(frozen=True)
class Cut:
    """A call that returned no graph from inputs that had one: where, and what it returned."""

    call: str
    at: Location | None
    grad_enabled: bool
    results: tuple[weakref.ref, ...]


class _Step(NamedTuple):
    """An optimizer's step under way: the frame that runs it (torch's wrapper of every `step`),
    the learner's line, and each tensor the step may change with its version before."""

    name: str  # `SGD.step`
    frame: Any
    at: Location | None
    before: list[tuple[torch.Tensor, int]]


class _Stepped(NamedTuple):
    """The tensors one optimizer step changed: (the tensor, its version before, after)."""

    call: str
    at: Location | None
    backwards: int
    changed: list[tuple[weakref.ref, int, int]]

    def records(self) -> list[InPlace]:
        records = []
        with _torch_functions_off():
            for ref, before, after in self.changed:
                tensor = ref()
                if tensor is None:
                    continue
                node = grad_fn(tensor)
                made_by = node.name() if node is not None else ""
                fields = (tuple(tensor.shape), made_by, _storage(tensor), before, after, self.at)
                records.append(InPlace(self.call, *fields, ref, self.backwards))
        return records


def _size(change: InPlace | _Stepped) -> int:
    return 1 if type(change) is InPlace else len(change.changed)


class Watch(TorchFunctionMode):
    """The explainer's eyes: enter it (a context manager, or `start()`) and every torch call on
    this thread is seen. Records live on the watch; `clear()` forgets them."""

    def __init__(self) -> None:
        super().__init__()
        #: In-place records (`InPlace`) and optimizer steps (`_Stepped`), oldest first; `_held`
        #: counts the records they hold (see `inplace`).
        self._changes: deque[InPlace | _Stepped] = deque()
        self._held = 0
        self.backwards: deque[Backward] = deque(maxlen=BACKWARDS_KEPT)
        self.cuts: deque[Cut] = deque(maxlen=KEPT // 4)
        self.grad_off_at: Location | None = None
        #: Whether torch's checkpoint switched gradients off there (not the learner's own code).
        self.grad_off_by_checkpoint = False
        self.backwards_seen = 0
        self._depth = 0  # the watch's own work (a backward's hooks) is not the learner's
        #: The optimizer steps under way on this thread, innermost last.
        self._steps: list[_Step] = []
        #: The last frame found to run inside the step (`_steps_own`), while a step runs: its
        #: further calls need no second look.
        self._own: Any = None

    def clear(self) -> None:
        self._changes.clear()
        self._held = 0
        self.backwards.clear()
        self.cuts.clear()
        self.grad_off_at = None
        self.grad_off_by_checkpoint = False
        self.backwards_seen = 0

    def __enter__(self) -> Watch:
        _hook_steps(self)
        if self._steps:  # a step that raised, seen by no call since (the last cell's)
            self._steps_own(sys._getframe())
        return super().__enter__()

    def __exit__(self, exc_type: Any, exc_value: Any, tb: Any) -> None:
        try:
            super().__exit__(exc_type, exc_value, tb)
        finally:
            self.left()

    def left(self) -> None:
        """This watch is off torch's mode stack (its exit, or taken off by hand): torch's
        optimizer-step hooks are removed when no watch is on."""
        _unhook_steps(self)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self._steps:  # inside an optimizer's step: its hooks note what the step changed
            caller = sys._getframe(1)
            if caller.f_code is _HANDLE:  # callers_frame(caller), without a call for a C function
                caller = callers_frame(caller)
            if caller is self._own or self._steps_own(caller):
                return call(func, args, kwargs or {}, caller)  # torch's own optimizer code
        if _is_compiling():  # torch.compile traces this method: it compiles torch's call alone
            return func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        caller = callers_frame(sys._getframe(1))
        name = getattr(func, "__name__", "")
        if name in _PROFILER:  # torch.optim's steps and zero_grad mark themselves for a profiler
            return call(func, args, kwargs, caller)
        if self._depth or name in _ATTRIBUTES:
            result = call(func, args, kwargs, caller)
            if not self._depth and type(result) is torch.Tensor:
                node = grad_fn(result)
                if node is not None:
                    node.metadata[MADE_AT] = learner_location(caller)  # x.T, x.real
            return result
        if name in ("backward", "grad") and func in _BACKWARDS:
            self._backward(name, args, kwargs)
            self._depth += 1
            try:
                return call(func, args, kwargs, caller)
            finally:
                self._depth -= 1
        if name == "_set_grad_enabled" and args and args[0] is False:
            self.grad_off_at = learner_location(caller)
            self.grad_off_by_checkpoint = inside_checkpoint(caller)
        inplace = (
            name[-1:] == "_" and name[-2:] != "__" and name not in _NOT_INPLACE
        ) or name == "__setitem__"
        if inplace or "out" in kwargs:
            target = kwargs["out"] if "out" in kwargs else (args[0] if args else None)
            if isinstance(target, torch.Tensor):
                return self._inplace(func, name, [target], args, kwargs, caller)
            if isinstance(target, (list, tuple)) and name.startswith("_foreach"):
                tensors = [t for t in target if isinstance(t, torch.Tensor)]
                return self._inplace(func, name, tensors, args, kwargs, caller)
        result = call(func, args, kwargs, caller)
        if _anomaly_enabled():
            bare_anomaly_traceback(result, caller)
        if type(result) is torch.Tensor:
            node = grad_fn(result)
            if node is not None:
                node.metadata[MADE_AT] = learner_location(caller)
                return result
        if result is not None and name not in _NOT_CUTS:  # .item() and the like return a value
            self._maybe_cut(name, args, kwargs, result)
        return result

    def _inplace(
        self, func: Any, name: str, targets: list, args: tuple, kwargs: dict, caller: Any
    ) -> Any:
        before = [_state(t) for t in targets]
        result = call(func, args, kwargs, caller)
        if _anomaly_enabled():
            bare_anomaly_traceback(targets, caller)
        at = learner_location(caller)
        for target, state in zip(targets, before, strict=True):
            after = _state(target)
            if state is None or after is None:  # an inference tensor, a view torch refuses
                continue
            (version, made_by), (version_after, node) = state, after
            self._keep(
                1,
                InPlace(
                    call=name,
                    shape=tuple(target.shape),
                    made_by=made_by.name() if made_by is not None else "",
                    storage=_storage(target),
                    version_before=version,
                    version_after=version_after,
                    at=at,
                    tensor=weakref.ref(target),
                    backwards=self.backwards_seen,
                ),
            )
            if node is not None and MADE_AT not in node.metadata:
                node.metadata[MADE_AT] = at
        return result

    def _backward(self, name: str, args: tuple, kwargs: dict) -> None:
        # torch hands a mode the roots of backward() and grad() first, and the rest by keyword
        # (`handle_torch_function` in torch/_tensor.py and torch/autograd/__init__.py)
        first = args[0]
        roots = [first] if isinstance(first, torch.Tensor) else list(first or ())
        retain_graph = bool(kwargs.get("retain_graph")) or bool(kwargs.get("create_graph"))
        # a graph kept for another backward is never held by the watch: its saved tensors would
        # stay alive; one this backward frees is held, to name it if a later backward needs it
        nodes = [grad_fn(r) for r in roots]
        held = () if retain_graph else tuple(nodes)
        newest = max((n._sequence_nr() for n in nodes if n is not None), default=-1)
        self.backwards.append(
            Backward(
                call=name,
                at=learner_location(sys._getframe(2)),
                roots=held,
                retain_graph=retain_graph,
                count=self.backwards_seen,
                newest=newest,
            )
        )
        self.backwards_seen += 1

    def _maybe_cut(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        if not any(t.requires_grad for t in inputs):
            return
        outputs = [result] if isinstance(result, torch.Tensor) else []
        if isinstance(result, (tuple, list)):
            outputs = [t for t in result if isinstance(t, torch.Tensor)]
        if any(t.requires_grad for t in outputs):
            return
        if not outputs and name not in TO_PYTHON:
            return
        self.cuts.append(
            Cut(
                call=name,
                at=learner_location(sys._getframe(2)),
                grad_enabled=torch.is_grad_enabled(),
                results=tuple(weakref.ref(t) for t in outputs),
            )
        )

    def _step_begins(self, optimizer: Any, frame: Any) -> None:
        """Torch's optimizer `optimizer` starts a step in `frame`: the versions of what it may
        change, and the learner's line (an optimizer the learner wrote is watched call by call,
        and so is one that computes with gradients on)."""
        if optimizer.defaults.get("differentiable") or _learners_step(type(optimizer)):
            return
        with _torch_functions_off():
            before = _versions(_step_tensors(optimizer))
        name = f"{type(optimizer).__name__}.step"
        self._steps.append(_Step(name, frame, learner_location(frame), before))

    def _step_ends(self, frame: Any) -> None:
        """The step that `frame` runs is done: its changes written down (and those of steps
        inside it that raised and were caught)."""
        if all(step.frame is not frame for step in self._steps):
            return
        while self._steps:
            step = self._steps.pop()
            self._stepped(step)
            if step.frame is frame:
                break
        self._own = None

    def _steps_own(self, frame: Any) -> bool:
        """Whether a call from `frame` is the running step's own: made by torch's code that the
        step's frame called, with no frame of the learner's code in between (a closure's, or a
        step hook's, is watched as ever). A step whose frame is no longer running raised: what
        it changed before it did is written down, and the watch looks at every call again."""
        innermost, own, outer, learners = self._steps[-1].frame, self._own, frame, False
        while outer is not None:
            if outer is innermost or (outer is own and own is not None):
                if outer is innermost and not learners:
                    self._own = frame  # not a frame of one call (`_get_value`) inside it
                return not learners
            learners = learners or is_learners(outer)
            outer = outer.f_back
        running = set()
        while frame is not None:
            running.add(frame)
            frame = frame.f_back
        while self._steps and self._steps[-1].frame not in running:
            self._stepped(self._steps.pop())
        self._own = None
        return False

    def _stepped(self, step: _Step) -> None:
        """What step `step` changed: each changed tensor with its versions, made into records
        only when they are read (a step of a model with many parameters changes several
        tensors per parameter, and they are read only to explain an error)."""
        changed = []
        with _torch_functions_off():
            for tensor, version in step.before:
                after = tensor._version
                if after != version:
                    changed.append((weakref.ref(tensor), version, after))
        if changed:
            changed = changed[-KEPT:]
            self._keep(len(changed), _Stepped(step.name, step.at, self.backwards_seen, changed))

    def _keep(self, size: int, change: InPlace | _Stepped) -> None:
        """Keep `change` (`size` records), and of the older ones only what the last KEPT
        records need."""
        self._changes.append(change)
        self._held += size
        while self._held - _size(self._changes[0]) >= KEPT:
            self._held -= _size(self._changes.popleft())

    @property
    def inplace(self) -> list[InPlace]:
        """The last KEPT in-place records, oldest first: an optimizer step's, one for each
        tensor it changed that still lives, made now (its shape, storage and maker read now)."""
        records: list[InPlace] = []
        for change in self._changes:
            if type(change) is InPlace:
                records.append(change)
            else:
                records += change.records()
        return records[-KEPT:]

    def start(self) -> Watch:
        """Switch the watch on for this thread until `stop()` (a script's whole run)."""
        self.__enter__()
        return self

    def stop(self) -> None:
        self.__exit__(None, None, None)


hide(Watch.__torch_function__, Watch._inplace)
_is_compiling = torch.compiler.is_compiling
_anomaly_enabled = torch.is_anomaly_enabled
_grad_enabled = torch.is_grad_enabled
_torch_functions_off = torch._C.DisableTorchFunction
#: The frame a torch function written in Python asks the modes from (see `callers_frame`).
_HANDLE = torch.overrides.handle_torch_function.__code__
_BACKWARDS = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}


def _state(t: torch.Tensor) -> tuple[int, Any] | None:
    """`(t._version, t.grad_fn)`, or None where reading them raises: an inference tensor has no
    version counter, and see `grad_fn`."""
    if t.is_inference():
        return None
    try:
        return t._version, t.grad_fn
    except RuntimeError:
        return None


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
        return 0


#: Torch's global optimizer-step hooks, registered while a watch is on (on any thread).
_STEP_HOOKS: list[Any] = []
#: The watches on, by id: how many times each was entered and not yet left.
_ON: dict[int, int] = {}


def _hook_steps(watch: Watch) -> None:
    _ON[id(watch)] = _ON.get(id(watch), 0) + 1
    if not _STEP_HOOKS:
        _STEP_HOOKS.append(register_optimizer_step_pre_hook(_step_hook(Watch._step_begins)))
        _STEP_HOOKS.append(register_optimizer_step_post_hook(_step_hook(Watch._step_ends)))


def _unhook_steps(watch: Watch) -> None:
    if _ON.get(id(watch), 0) > 1:
        _ON[id(watch)] -= 1
    else:
        _ON.pop(id(watch), None)
    if not _ON:
        while _STEP_HOOKS:
            _STEP_HOOKS.pop().remove()


def _step_hook(method: Callable[..., None]) -> Callable[..., None]:
    """A global optimizer-step hook that hands the step to each watch on this thread's mode
    stack: its optimizer to `_step_begins`, the frame of torch's `step` wrapper that called the
    hook (the same frame calls both hooks) to both. It never raises: a step the watch could not
    note is watched call by call."""

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            stack = torch.overrides._get_current_function_mode_stack()
            watches = [mode for mode in stack if isinstance(mode, Watch)]
            if not watches or _is_compiling():
                return
            frame = sys._getframe(1)
            for watch in watches:
                if method is Watch._step_begins:
                    watch._step_begins(optimizer, frame)
                else:
                    watch._step_ends(frame)
        except Exception:  # the learner's step goes on, watched as any code
            return

    return hook


def _step_tensors(optimizer: Any) -> list[torch.Tensor]:
    """What an optimizer's step may change in place: the state tensors it holds, then each
    parameter's gradient and the parameter (the parameters last: when records tie, the latest
    is named, and a step's parameters are what a graph saved far more often than its state)."""
    found = [
        value
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    ]
    for group in optimizer.param_groups:
        for p in group["params"]:
            grad = p.grad
            if grad is not None:
                found.append(grad)
            found.append(p)
    return found


def _versions(tensors: list[torch.Tensor]) -> list[tuple[torch.Tensor, int]]:
    """Each tensor with its version; an inference tensor, which has none, left out."""
    try:
        return [(t, t._version) for t in tensors]
    except RuntimeError:
        return [(t, t._version) for t in tensors if not t.is_inference()]


#: Whether an optimizer class's `step` is the learner's own code, by class.
_LEARNERS_STEP: dict[type, bool] = {}


def _learners_step(kind: type) -> bool:
    known = _LEARNERS_STEP.get(kind)
    if known is None:
        step = inspect.unwrap(kind.step)
        code = getattr(step, "__code__", None)
        module = getattr(step, "__module__", None) or ""
        known = _LEARNERS_STEP[kind] = code is not None and is_learners_code(code, module)
    return known
