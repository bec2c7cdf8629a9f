"""Calling torch from inside a torch function mode as if no mode were there.

The course's two watchers, the doctor's recorder (`helpers.doctor.record`) and the explainer's
watch (`helpers.explain.watch`), are torch function modes: every torch call of the learner's code
passes through their `__torch_function__`, which then makes the call itself. Done naively, that
extra Python frame shows where the learner looks:

- a warning torch raises from C++ is reported at the mode's line instead of the learner's, and a
  warning Python shows once per line is then shown once in all;
- anomaly mode's "Traceback of forward call that caused the error" ends in the mode's code;
- `torch.compile` traces the mode's own Python, cannot, and compiles nothing.

`call` makes the call from a frame that Python's warnings read as the caller's own line (its
file, line number and module), `bare_anomaly_traceback` rewrites what anomaly mode stored to what
it stores without the mode, `bare_traceback` takes the modes' frames out of an error's traceback
(the explainer shows errors through it), and a mode steps aside while
`torch.compiler.is_compiling()`.
"""

from __future__ import annotations

import contextlib
import traceback
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import handle_torch_function

__all__ = [
    "bare_anomaly_traceback",
    "bare_traceback",
    "call",
    "callers_frame",
    "grad_fn",
    "hide",
    "modes_off",
]

#: The code of `func(*args, **kwargs)`; each copy gets a caller's file, line and name.
_CALL = (lambda __watching_call__, args, kwargs: __watching_call__(*args, **kwargs)).__code__
#: One function per call site: (the id of the caller's code, the offset of its call instruction,
#: the id of its globals) -> (that code, the function). The code and the function (which holds
#: the globals) keep both ids theirs while the entry lives. Cleared past _KEPT entries.
_AS_CALLER: dict[tuple[int, int, int], tuple[types.CodeType, types.FunctionType]] = {}
_KEPT = 4096
#: A Python function of torch's (`F.softmax`, `Tensor.backward`) asks the modes through this.
_HANDLE = handle_torch_function.__code__
#: Where anomaly mode keeps a node's forward traceback (torch/csrc/autograd/python_anomaly_mode).
_ANOMALY_KEY = "traceback_"
#: How this module's frames appear in a formatted stack.
_THIS_FILE = f'File "{__file__}"'


def grad_fn(t: Any) -> Any:
    """`t.grad_fn`, or None where reading it raises: torch raises for a view made under no_grad
    whose base was then changed in place, though the learner's own code never read it."""
    try:
        return t.grad_fn if isinstance(t, torch.Tensor) else None
    except RuntimeError:
        return None


def callers_frame(frame: Any) -> Any:
    """The frame that called the torch function, from the frame that called the mode (`frame`):
    the same frame for a C function (`x.exp()`), the frame above `handle_torch_function` and the
    Python function that called it for one written in Python (`F.softmax`)."""
    if frame is not None and frame.f_code is _HANDLE:
        frame = frame.f_back  # the Python function's own frame (its first, mode-asking, call)
        if frame is not None:
            frame = frame.f_back
    return frame


def call(func: Any, args: tuple, kwargs: dict, caller: Any) -> Any:
    """`func(*args, **kwargs)`, made from a frame with `caller`'s file, line and module: a
    warning raised inside is shown, and counted once per line, as without the mode."""
    if caller is None:
        return func(*args, **kwargs)
    code = caller.f_code
    # by the call's instruction, not its line: a frame's f_lineno is decoded from its code's
    # line table, which in a long function (an optimizer's) costs more than the call itself;
    # by the code's identity, not the code: code objects compare equal across files
    key = (id(code), caller.f_lasti, id(caller.f_globals))
    known = _AS_CALLER.get(key)
    if known is None or known[0] is not code:
        if len(_AS_CALLER) >= _KEPT:
            _AS_CALLER.clear()
        copy = _CALL.replace(
            co_filename=code.co_filename,
            co_firstlineno=caller.f_lineno,
            co_name=code.co_name,
            co_qualname=code.co_name,
        )
        known = _AS_CALLER[key] = (code, types.FunctionType(copy, caller.f_globals))
    return known[1](func, args, kwargs)


def bare_anomaly_traceback(result: Any, caller: Any) -> None:
    """Under anomaly mode, make the forward traceback stored on each tensor of `result` the one
    a run without the mode stores: `caller`'s stack, then what ran inside the torch function."""
    if not torch.is_anomaly_enabled() or caller is None:
        return
    tensors = result if isinstance(result, (tuple, list)) else (result,)
    outer = None
    for tensor in tensors:
        node = getattr(tensor, "grad_fn", None) if isinstance(tensor, torch.Tensor) else None
        stack = node.metadata.get(_ANOMALY_KEY) if node is not None else None
        if not isinstance(stack, list):
            continue
        ours = [i for i, entry in enumerate(stack) if _THIS_FILE in entry]
        if not ours:
            continue
        if outer is None:
            outer = traceback.format_stack(caller)
        # after this module's last frame comes the call made as the caller; then torch's own
        node.metadata[_ANOMALY_KEY] = outer + stack[ours[-1] + 2 :]



#: The code of the frames a watcher adds between the learner's call and torch's (`hide`).
_ADDED: set[Any] = {_HANDLE, call.__code__}


def hide(*functions: Any) -> None:
    """Count `functions` (a mode's `__torch_function__` and what it calls around torch's call)
    among the frames `bare_traceback` takes out."""
    _ADDED.update(f.__code__ for f in functions)


def bare_traceback(tb: Any) -> Any:
    """The traceback `tb` as it is without the modes: their frames out, and the calls made as
    the caller (`call`), and, for a torch function written in Python, its first, mode-asking,
    frame (the one above `handle_torch_function`)."""
    kept: list[Any] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is _HANDLE and kept and kept[-1].tb_frame is tb.tb_frame.f_back:
            kept.pop()  # the Python function that asked the modes
        if code not in _ADDED and code.co_varnames[:1] != _CALL.co_varnames[:1]:
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


@contextlib.contextmanager
def modes_off() -> Iterator[None]:
    """No torch function mode for the block, as in a run without the watchers: for code that
    compiles (torch.compile traces the modes it finds and, with one there, can compile another
    program: a function that calls `retain_grad()` returns None for its loss on torch 2.13)."""
    stack = torch.overrides._get_current_function_mode_stack()
    for _ in stack:
        torch._C._pop_torch_function_stack()
    try:
        yield
    finally:
        for mode in stack:
            torch._C._push_on_torch_function_stack(mode)
