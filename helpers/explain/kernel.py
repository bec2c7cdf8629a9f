"""The explainer in a Jupyter kernel: `%load_ext helpers` calls `load`.

Each cell runs with the watch on (IPython's `pre_run_cell` and `post_run_cell` events), so what
the learner's cells do is recorded and nothing outside a cell is; but a cell that may run
torch.compile runs unwatched (`compiles`), since the compiler would trace the watch too. An
error that reaches the top of a cell goes to one handler: a cell run twice or out of order is
explained as such (`helpers.rerun`), an autograd error by its family
(`helpers.explain.catalogue`), and anything else keeps IPython's usual traceback. With an
explanation, the full traceback is one click away (a folded `<details>` below it), and torch's
own message stays in the cell's error output.
"""

from __future__ import annotations

import ast
import html
import itertools
import re
from typing import Any

import torch

from helpers import rerun
from helpers.doctor.watching import bare_traceback
from helpers.explain import explain
from helpers.explain.watch import Watch

__all__ = ["compiles", "load", "unload"]

_LOADED = "_autograd_notebooks_explainer"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def load(shell: Any) -> bool:
    """Switch the explainer on in this kernel (once); False where there is no IPython shell."""
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if getattr(shell, _LOADED, None) is not None:
        return True
    watch = Watch()
    watched = False  # whether the running cell is watched

    def starts(info: Any = None, *_: Any) -> None:
        nonlocal watched
        if not compiles(shell.transform_cell(getattr(info, "raw_cell", "") or ""), shell.user_ns):
            watch.start()
            watched = True

    def stops(*_: Any) -> None:
        nonlocal watched
        if watched:
            watched = False
            _stop(watch)

    shell.events.register("pre_run_cell", starts)
    shell.events.register("post_run_cell", stops)
    shell.set_custom_exc((Exception,), lambda *args, **kw: _handler(watch, *args, **kw))
    setattr(shell, _LOADED, (watch, starts, stops))
    return True


def unload(shell: Any) -> None:
    """`%unload_ext helpers`: the watch off, IPython's own handler back."""
    loaded = getattr(shell, _LOADED, None)
    if loaded is None:
        return
    watch, starts, stops = loaded
    shell.events.unregister("pre_run_cell", starts)
    shell.events.unregister("post_run_cell", stops)
    _stop(watch)
    shell.set_custom_exc((), None)
    setattr(shell, _LOADED, None)


def compiles(cell: str, namespace: dict[str, Any]) -> bool:
    """Whether cell `cell` may run torch.compile: it names `compile`, dynamo or `export`, or a
    name of `namespace` that holds a compiled function or module (in a list or dict too, or a
    function that uses one). Such a cell runs unwatched: torch.compile traces the modes it finds,
    and with one there can compile another program (`helpers.doctor.watching.modes_off`)."""
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _COMPILING:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [getattr(node, "module", None) or "", *(a.name for a in node.names)]
            if any(_COMPILING.intersection(m.split(".")) for m in modules):
                return True
        if isinstance(node, ast.Name):
            if node.id in _COMPILING:
                return True
            value = namespace.get(node.id)
            if value is not None and (
                _compiled(value)
                or any(_compiled(namespace.get(n)) for n in _globals_used(value))
            ):
                return True
    return False


#: The names that compile: `torch.compile`, `model.compile()`, `torch._dynamo`, `torch.export`.
_COMPILING = frozenset({"compile", "_dynamo", "export"})


def _compiled(value: Any) -> bool:
    """A function torch.compile returned, or a module that is, holds or was made one; or a list,
    tuple or dict that holds one among its first HELD items (`models[0](x)`)."""
    if isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return any(_compiled_one(v) for v in itertools.islice(items, HELD))
    return _compiled_one(value)


#: How many items of a list, tuple or dict `compiles` looks at: enough for the models a learner
#: keeps side by side, not a data set's worth at every cell.
HELD = 64


def _compiled_one(value: Any) -> bool:
    if value is None:
        return False
    if callable(value) and hasattr(value, "_torchdynamo_orig_callable"):
        return True
    modules = getattr(value, "modules", None)
    if not callable(modules) or not hasattr(value, "_modules"):  # not an nn.Module
        return False
    return any(
        type(m).__name__ == "OptimizedModule" or m._compiled_call_impl is not None
        for m in modules()
    )


def _globals_used(value: Any) -> tuple[str, ...]:
    code = getattr(value, "__code__", None)
    return code.co_names if code is not None else ()


def _stop(watch: Watch) -> None:
    """Take the watch off torch's mode stack, and nothing else: a mode the cell left on above it
    (`torch.set_default_device` leaves one) stays."""
    watch.left()
    stack = torch.overrides._get_current_function_mode_stack()
    if not any(mode is watch for mode in stack):  # a cell that popped modes itself
        return
    for _ in stack:
        torch._C._pop_torch_function_stack()
    for mode in stack:
        if mode is not watch:
            torch._C._push_on_torch_function_stack(mode)


def _handler(watch: Watch, shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):
    """IPython's custom exception handler: a re-run first (its story is the cause), then an
    autograd family; otherwise IPython's usual traceback, as it is without the watch."""
    tb = bare_traceback(tb)

    def autograd(usual: list[str]) -> list[str]:
        explanation = explain(value, tb, watch)
        if explanation is None:
            shell._showtraceback(etype, value, usual)
            return usual
        from IPython.display import HTML, display

        folded = html.escape(_ANSI.sub("", "\n".join(usual)))
        details = f"<details><summary>traceback</summary><pre>{folded}</pre></details>"
        display(HTML(explanation.as_html() + details))
        short = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, short)
        return short

    return rerun.handler(shell, etype, value, tb, tb_offset, otherwise=autograd)
