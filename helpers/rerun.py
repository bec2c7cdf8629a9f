"""Errors that explain themselves when a learner runs a cell twice, or cells out of order.

    %load_ext helpers         # in a Jupyter kernel: its handler asks this module first

A notebook's cells hand state to each other: one builds a graph, the next walks it with
`backward()`; one fills `.grad`, the next checks it. Run a cell a second time (Shift-Enter twice)
and it meets the state its first run left: a graph already freed, gradients added twice, a
version counter bumped. The error that follows is true but says nothing of the cause. `handler`,
the IPython exception handler (`set_custom_exc`) that `%load_ext helpers` sets
(`helpers.explain.kernel`), says for an error raised in a notebook cell what happened, why, and
which cell to run again from, in the learner's language (`helpers.language`); an error that has
nothing to do with a re-run goes to the autograd explainer, or keeps IPython's usual traceback.

How it knows which cell: IPython keeps every cell it ran, in order (`In`). A cell whose code ran
before is a re-run. The cell to run again from is the last one before it (not itself) that
assigns a name the failing line uses: the cell that builds `loss` when `loss.backward()` fails.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from helpers.language import say

__all__ = ["HEADER_KEY", "explain", "handler"]

#: The text file key of the first line of every explanation (a test looks for it).
HEADER_KEY = "rerun.header"
_BACKWARD_TWICE = "Trying to backward through the graph a second time"
#: Per shell, the `In` numbers of the cells whose run raised (a cell that failed the first time
#: too was not spoiled by its first run).
_FAILED: dict[int, set[int]] = {}


def handler(
    shell: Any,
    etype: type,
    value: BaseException,
    tb: Any,
    tb_offset: Any = None,
    otherwise: Any = None,
):
    """IPython's custom exception handler: shows the explanation, then (unless the explanation
    says it all) the usual traceback. IPython ignores what a handler returns; it must show.
    `otherwise(usual)`, when given, shows an error that is no re-run's (the autograd explainer)."""
    shown = usual = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    history = list(shell.user_ns.get("In", []))
    failed = _FAILED.setdefault(id(shell), set())
    try:
        explanation = explain(value, tb, history, failed)
    except Exception:  # never let the explainer hide the learner's error
        explanation = None
    failed.add(len(history) - 1)
    if explanation is not None:
        lines, complete = explanation
        said = [_bold(lines[0]), *lines[1:]]
        shown = said if complete else [*said, "", *usual]
    elif otherwise is not None:
        return otherwise(usual)
    shell._showtraceback(etype, value, shown)
    return shown


def _bold(text: str) -> str:
    return f"\x1b[1;31m{text}\x1b[0m"


def explain(
    error: BaseException, tb: Any, history: list[str], failed: set[int] | frozenset = frozenset()
) -> tuple[list[str], bool] | None:
    """What to tell the learner about `error`, raised while running the last cell of `history`
    (IPython's `In`; `failed` holds the numbers of the earlier cells that raised): the lines,
    and whether they replace the traceback. None: say nothing."""
    if len(history) < 2:
        return None
    current, earlier = history[-1], history[1:-1]
    frame_line = _cell_line(tb)
    statement = _statement(current, frame_line) if frame_line else None
    rerun = _rerun_note(current, earlier, failed, _loaded(statement))
    backward_twice = isinstance(error, RuntimeError) and _BACKWARD_TWICE in str(error)
    assertion = isinstance(error, AssertionError) and frame_line is not None
    if not (backward_twice or rerun or assertion):
        return None
    lines = [
        say("common", HEADER_KEY),
        f"{type(error).__name__}: {_first_line(error)}".rstrip(": "),
    ]
    if backward_twice:
        name = _backward_root(statement) if statement is not None else None
        lines.append(say("common", "rerun.backward_twice", graph=f"`{name}`" if name else "?"))
    else:
        if assertion and statement is not None:
            lines.append(say("common", "rerun.check_failed", check=_source(current, statement)))
    if rerun:
        lines.append(rerun)
        if not backward_twice:
            lines.append(say("common", "rerun.changed_state"))
    lines.append(_run_from(statement, current, earlier))
    return lines, backward_twice


def _first_line(error: BaseException) -> str:
    """The message's first line, cut at its first sentence when long (torch's run on)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > 100 and ". " in first:
        first = first[: first.index(". ") + 1]
    return first


def _rerun_note(current: str, earlier: list[str], failed: Any, reads: list[str]) -> str:
    """Says so when this cell ran before (and that run did not fail), or when another cell that
    uses a name the failing line reads ran twice; "" otherwise."""
    for index in range(len(earlier) - 1, -1, -1):
        if earlier[index] == current:
            if index + 1 in failed:
                break  # it failed the first time too: its first run changed nothing
            return say("common", "rerun.this_cell", before=index + 1)
    for index in range(len(earlier) - 1, 0, -1):  # the latest cell that repeated an earlier one
        source = earlier[index]
        if source.strip() and source != current and source in earlier[:index]:
            uses = _chain([*_reads(source), *_bindings(source)], source, earlier[:index])
            if set(reads) & ({*_reads(source), *_bindings(source), *uses}):
                first = max(k for k in range(index) if earlier[k] == source)
                return say("common", "rerun.other_cell", first=first + 1, second=index + 1)
    return ""


def _cell_line(tb: Any) -> int | None:
    """The line of the current cell where the error passed (its innermost frame in the cell)."""
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and _cell_file(code.co_filename):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _cell_file(filename: str) -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    names = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if names is not None:
        return filename in names
    return filename.startswith("<ipython-input-") or "ipykernel_" in filename


def _statement(source: str, line: int) -> ast.stmt | None:
    """The innermost simple statement of `source` on `line`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if not hasattr(node, "body") or found is None:
                found = node
    return found


def _source(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node) or ""
    return " ".join(part.strip() for part in text.splitlines())


def _backward_root(statement: ast.stmt) -> str | None:
    """The name the failing backward starts from: `loss` in `loss.backward()`, `y` in
    `y.sum().backward()`, `out` in `torch.autograd.grad(out, x)`."""
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        on_autograd = isinstance(func, ast.Attribute) and (
            (isinstance(func.value, ast.Attribute) and func.value.attr == "autograd")
            or (isinstance(func.value, ast.Name) and func.value.id == "autograd")
        )
        if isinstance(func, ast.Attribute) and func.attr == "backward" and not on_autograd:
            names = [n.id for n in ast.walk(func.value) if isinstance(n, ast.Name)]
            if names:
                return names[0]
        if on_autograd and func.attr in ("grad", "backward") and node.args:
            names = [n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)]
            if names:
                return names[0]
    return None


def _loaded(node: ast.AST | None) -> list[str]:
    """The names `node` reads, in order of first appearance."""
    if node is None:
        return []
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


@lru_cache(maxsize=512)  # the chain asks each earlier cell about each name it reads
def _bindings(source: str) -> Mapping[str, int]:
    """The names a cell binds at its top level or in its blocks (not inside functions), each
    with the line of its last binding; imports are left out (a module is not state a re-run
    changes)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return MappingProxyType({})
    bound: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[child.name] = child.lineno
                continue
            if isinstance(child, ast.Lambda):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                bound[child.id] = child.lineno
            visit(child)

    visit(tree)
    return MappingProxyType(bound)  # cached: shared by every caller, so read-only


def _run_from(statement: ast.stmt | None, current: str, earlier: list[str]) -> str:
    """Which cell to run again from. The names the failing line reads (the name backward starts
    from first), that this cell does not bind itself, are made by earlier cells; those cells
    read names made by cells before them, and so on. The earliest cell of that chain is where
    everything the failing line depends on is made again."""
    own = _bindings(current)
    try:
        whole = ast.parse(current)
    except SyntaxError:
        whole = None
    root = _backward_root(statement) if statement is not None else None
    wanted = [root] if root else []
    wanted += [n for n in _loaded(statement) + _loaded(whole) if n not in own or n == root]
    chain = _chain(wanted, current, earlier)
    if not chain:
        return say("common", "rerun.run_from_top")
    name, index = min(chain.items(), key=lambda item: item[1])
    source = earlier[index]
    line = source.splitlines()[_bindings(source)[name] - 1].strip()
    return say("common", "rerun.run_from", cell=index + 1, name=name, line=line)


def _chain(names: list[str], current: str, earlier: list[str]) -> dict[str, int]:
    """Name -> the index (in `earlier`) of the last cell before that made it, for `names` and,
    in turn, for the names those cells read; cells with `current`'s code are not searched."""
    chain: dict[str, int] = {}
    todo = list(dict.fromkeys(names))
    while todo:
        name = todo.pop(0)
        if name in chain:
            continue
        for index in range(len(earlier) - 1, -1, -1):
            source = earlier[index]
            if source != current and name in _bindings(source):
                chain[name] = index
                todo += [n for n in _reads(source) if n not in _bindings(source)]
                break
    return chain


@lru_cache(maxsize=512)
def _reads(source: str) -> tuple[str, ...]:
    try:
        return tuple(_loaded(ast.parse(source)))
    except SyntaxError:
        return ()
