"""A function written in a notebook cell, run on the ranks: carried there as its source text.

A rank is a new process. It can import a module's function by name, but a function defined in a
notebook cell lives only in the kernel, so `run_ranks` carries it: `carry(function)` takes its
source and the names it uses from the notebook (modules and importable functions or classes by
their import path, plain values such as numbers, strings and tuples as they are, other cell
functions the same way), and `run_carried` rebuilds it on each rank and calls it. What cannot
cross (a tensor or a model made in the notebook) is named, with what to do instead.

    def pipeline_rank(rank, world_size): ...        # in a notebook cell
    run_ranks(pipeline_rank, 3)                     # carried, then run on three processes
"""

from __future__ import annotations

import builtins
import dis
import importlib
import inspect
import linecache
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from helpers.naming import a_type

__all__ = ["CarriedFunction", "carry", "is_cell_function", "run_carried"]

#: Values that cross to a rank as they are (and containers of them).
_PLAIN = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device)


@dataclass(frozen=True)
class CarriedFunction:
    """A cell function as a rank rebuilds it: its source and what its names refer to."""

    name: str
    source: str
    modules: dict[str, str] = field(default_factory=dict)  # name -> module to import
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, name)
    values: dict[str, Any] = field(default_factory=dict)  # name -> a plain value
    functions: dict[str, CarriedFunction] = field(default_factory=dict)  # other cell functions

    def rebuild(self) -> Callable[..., Any]:
        """The function again, in a fresh namespace of the names it uses."""
        namespace: dict[str, Any] = {"__name__": "__notebook__"}
        for name, module in self.modules.items():
            namespace[name] = importlib.import_module(module)
        for name, (module, qualname) in self.imported.items():
            namespace[name] = _lookup(module, qualname)
        namespace.update(self.values)
        for name, other in self.functions.items():
            namespace[name] = other.rebuild()
        filename = f"<notebook cell: {self.name}>"  # tracebacks on the rank quote these lines
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        exec(compile(self.source, filename, "exec"), namespace)
        return namespace[self.name]


def is_cell_function(target: Any) -> bool:
    """True for a function defined at the top level of a notebook cell (or of a script run as
    __main__): a rank cannot import it by name."""
    return (
        inspect.isfunction(target)
        and target.__module__ in ("__main__", "__notebook__")
        and "<" not in target.__qualname__
    )


def _lookup(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _used_names(code: types.CodeType) -> set[str]:
    """The global names a piece of code reads, its nested functions' included."""
    names = {
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _used_names(const)
    return names


def _is_plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (tuple, list, set, frozenset)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    return False


def _importable(value: Any) -> tuple[str, str] | None:
    """(module, name) under which a rank finds this very object, or None."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    if module in ("__main__", "__notebook__"):
        return None
    try:
        return (module, qualname) if _lookup(module, qualname) is value else None
    except (ImportError, AttributeError):
        return None


def carry(function: Callable[..., Any], _seen: frozenset[str] = frozenset()) -> CarriedFunction:
    """`function`, a cell function, as a rank can rebuild it.

    Raises TypeError naming each name the function uses that cannot reach a rank, and NameError
    for a name the notebook has not defined."""
    if not is_cell_function(function):
        raise TypeError(
            f"carry() takes a function defined with def at the top level of a notebook cell, "
            f"not {function!r}"
        )
    name = function.__name__
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as err:
        raise TypeError(
            f"the source of {name}() cannot be read ({err}); define it with def in a cell and "
            "run that cell again"
        ) from None
    carried = CarriedFunction(name, source)
    found = function.__globals__
    for used in sorted(_used_names(compile(source, name, "exec")) - {name}):
        if used not in found:
            if hasattr(builtins, used):
                continue
            raise NameError(
                f"{name}() uses {used!r}, which the notebook has not defined: run the cell that "
                f"defines or imports {used!r}, then this one again"
            )
        value = found[used]
        if isinstance(value, types.ModuleType):
            carried.modules[used] = value.__name__
        elif (where := _importable(value)) is not None:
            carried.imported[used] = where
        elif is_cell_function(value):
            if used not in _seen:  # (functions calling each other are carried once)
                carried.functions[used] = carry(value, _seen | {name})
        elif _is_plain(value):
            carried.values[used] = value
        else:
            raise TypeError(
                f"{name}() uses {used!r}, {a_type(value)} made in the notebook. Each rank "
                f"is a new process that runs {name}()'s source alone: build {used!r} inside "
                f"{name}(), pass it in run_ranks(..., kwargs={{...}}), or import it from a module"
            )
    return carried


def run_carried(rank: int, world_size: int, *, carried: CarriedFunction, **kwargs: Any) -> Any:
    """On a rank: rebuild the carried cell function and run it (what `run_ranks` starts)."""
    return carried.rebuild()(rank, world_size, **kwargs)
