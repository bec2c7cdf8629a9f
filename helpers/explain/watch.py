"""What the explainer writes down while it is on: the few facts an error's cause needs later.

A torch function mode (`torch.overrides.TorchFunctionMode`) sees every torch call with its
arguments. For most calls the watch only notes, on the backward function the result gets, the
line of the learner's code that made it (in the node's own `metadata`, as anomaly mode keeps its
traceback there). It writes more for a few kinds of call:

- an in-place call (`mul_`, `h[0] = 0`, `copy_`, an `out=` argument): the tensor's version before
  and after, what made the tensor (its `grad_fn` then), and the line;
- a backward (`loss.backward()`, `torch.autograd.backward`, `torch.autograd.grad`): the line and
  the graph it started from, so a later "backward through the graph a second time" can name the
  backward that freed what the failing one needs;
- a cut: a call whose tensor inputs require grad and whose result does not (`.item()`, `.numpy()`,
  `.detach()`, an integer `argmax`, anything under `no_grad`), with the line, so that "element 0 of
  tensors does not require grad" can name where the graph stopped.

Each list keeps only its last entries, so a long training loop holds no more than a few hundred
small records. Nothing is changed: every call computes, warns and leaves anomaly mode's traceback
as it would without the watch (`helpers.doctor.watching`), and under `torch.compile` the watch
steps aside.
"""

from __future__ import annotations

import sys
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode

from helpers.doctor.record import Location, is_learners
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
_NOT_CUTS = {"backward", "register_hook", "retain_grad", "requires_grad_", "__set__", "__get__"}
#: The file of torch's activation checkpointing: a reentrant checkpoint runs its function with
#: gradients off, and its result requires grad only when one of its inputs does.
_CHECKPOINT_FILE = ("torch", "utils", "checkpoint.py")


def learner_location(frame: Any) -> Location | None:
    """The innermost frame of the learner's code from `frame` outwards (not torch's, not the
    course's, not an installed package's)."""
    while frame is not None:
        if is_learners(frame):
            return Location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


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


class Watch(TorchFunctionMode):
    """The explainer's eyes: enter it (a context manager, or `start()`) and every torch call on
    this thread is seen. Records live on the watch; `clear()` forgets them."""

    def __init__(self) -> None:
        super().__init__()
        self.inplace: deque[InPlace] = deque(maxlen=KEPT)
        self.backwards: deque[Backward] = deque(maxlen=BACKWARDS_KEPT)
        self.cuts: deque[Cut] = deque(maxlen=KEPT // 4)
        self.grad_off_at: Location | None = None
        #: Whether torch's checkpoint switched gradients off there (not the learner's own code).
        self.grad_off_by_checkpoint = False
        self.backwards_seen = 0
        self._depth = 0  # the watch's own work (a backward's hooks) is not the learner's

    def clear(self) -> None:
        self.inplace.clear()
        self.backwards.clear()
        self.cuts.clear()
        self.grad_off_at = None
        self.grad_off_by_checkpoint = False
        self.backwards_seen = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _is_compiling():  # torch.compile traces this method: it compiles torch's call alone
            return func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        caller = callers_frame(sys._getframe(1))
        name = getattr(func, "__name__", "")
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
            self.inplace.append(
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
                )
            )
            if node is not None and MADE_AT not in node.metadata:
                node.metadata[MADE_AT] = at
        return result

    def _backward(self, name: str, args: tuple, kwargs: dict) -> None:
        first = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
        roots = [first] if isinstance(first, torch.Tensor) else list(first or ())
        # retain_graph is the third positional of both backwards, the fourth of grad
        position = 2 if name == "backward" else 3
        retain = kwargs.get("retain_graph", args[position] if len(args) > position else None)
        retain_graph = bool(retain) or bool(kwargs.get("create_graph"))
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

    def start(self) -> Watch:
        """Switch the watch on for this thread until `stop()` (a script's whole run)."""
        self.__enter__()
        return self

    def stop(self) -> None:
        self.__exit__(None, None, None)


hide(Watch.__torch_function__, Watch._inplace)
_is_compiling = torch.compiler.is_compiling
_anomaly_enabled = torch.is_anomaly_enabled
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
