"""The learner's source read as Python: the function a frame runs, the statements that bind a
name in it, the loops and `with` blocks around a line. The explainer's edits go where these say;
where the source cannot be read (no file, a cell that does not parse) they find nothing, and the
explanation gives its fix in words.
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

__all__ = [
    "Scope",
    "binds",
    "dominates",
    "reads",
    "scope_at",
    "scope_of",
    "single_line",
    "withs_around",
]

#: The statements a scope holds but does not own: their bodies are scopes of their own.
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
#: The statements whose body runs again and again.
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _tree(filename: str) -> ast.Module | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None


class Scope:
    """One function of the learner's source (or the module itself): its statements, each with
    the chain of statements it is nested in, not counting the functions and classes it defines."""

    def __init__(self, node: ast.AST, lines: list[str]) -> None:
        self.node = node
        self.lines = lines
        self.parents: dict[ast.stmt, list[ast.stmt]] = {}  # statement -> outermost first
        self.block: dict[ast.stmt, tuple[str, ...]] = {}  # the blocks it sits in (body, orelse)
        self._walk(node, [], ())

    def _walk(self, node: ast.AST, chain: list[ast.stmt], block: tuple[str, ...], at="") -> None:
        for field, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.stmt):
                    self.parents[child] = chain
                    self.block[child] = (*block, at + field)
                    if not isinstance(child, _SCOPES):
                        self._walk(child, [*chain, child], self.block[child])
                elif isinstance(child, (ast.excepthandler, ast.match_case)):
                    self._walk(child, chain, block, f"{at}{field}{id(child)}.")

    def statements(self) -> list[ast.stmt]:
        """Every statement of the scope, in the order of the source."""
        return sorted(self.parents, key=lambda s: (s.lineno, s.col_offset))

    def statement_at(self, line: int) -> ast.stmt | None:
        """The innermost statement of the scope that spans `line`."""
        spanning = [
            s for s in self.parents if s.lineno <= line <= (s.end_lineno or s.lineno)
        ]
        return max(spanning, key=lambda s: len(self.parents[s]), default=None)

    def loops_around(self, line: int) -> list[ast.stmt]:
        """The loops of the scope whose body holds `line`, outermost first."""
        statement = self.statement_at(line)
        if statement is None:
            return []
        return [s for s in [*self.parents[statement], statement] if isinstance(s, _LOOPS)]

    def inside(self, statement: ast.stmt, outer: ast.stmt) -> bool:
        """Whether `statement` is `outer` or nested in it."""
        return statement is outer or outer in self.parents.get(statement, ())


def scope_of(frame: Any) -> Scope | None:
    """The scope `frame` runs: the module, or the function whose code it is (None for a lambda,
    a comprehension, or source that cannot be read)."""
    code = frame.f_code
    tree = _tree(code.co_filename)
    if tree is None:
        return None
    lines = linecache.getlines(code.co_filename)
    if code.co_name == "<module>":
        return Scope(tree, lines)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno:
                return Scope(node, lines)
    return None


def scope_at(filename: str, line: int) -> Scope | None:
    """The innermost function of file `filename` whose body holds `line`, else its module."""
    tree = _tree(filename)
    if tree is None:
        return None
    spanning = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body[0].lineno <= line <= (node.end_lineno or node.lineno)
    ]
    node = max(spanning, key=lambda n: n.lineno, default=tree)
    return Scope(node, linecache.getlines(filename))


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def binds(statement: ast.stmt, name: str) -> bool:
    """Whether `statement` itself binds `name` (`x = ...`, `out, (h, c) = ...`, `x += ...`, a
    loop's or a `with`'s target), not a statement nested in its body."""
    if isinstance(statement, ast.Assign):
        return any(name in _names(t) for t in statement.targets)
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return name in _names(statement.target)
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return any(
            name in _names(item.optional_vars)
            for item in statement.items
            if item.optional_vars is not None
        )
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in statement.names)
    return False


def reads(statement: ast.stmt, name: str) -> bool:
    """Whether the value an assignment computes reads `name` (`h = cell(x, h)`, `h += x`)."""
    if isinstance(statement, ast.AugAssign):
        return True
    value = getattr(statement, "value", None) if isinstance(statement, _ASSIGNS) else None
    return value is not None and name in _names(value)


_ASSIGNS = (ast.Assign, ast.AugAssign, ast.AnnAssign)


def single_line(scope: Scope, statement: ast.stmt) -> bool:
    """Whether `statement` is an assignment that is its line, alone: an edit may replace it."""
    if not isinstance(statement, _ASSIGNS) or statement.lineno != statement.end_lineno:
        return False
    line = scope.lines[statement.lineno - 1]
    others = [s for s in scope.parents if s.lineno == statement.lineno and s is not statement]
    return not others and statement.col_offset == len(line) - len(line.lstrip())


def dominates(scope: Scope, statement: ast.stmt, later: ast.stmt) -> bool:
    """Whether `statement` has run whenever `later` runs: it comes first, in a block that holds
    `later` too (not in a branch or a loop that `later` is outside of)."""
    if statement.lineno >= later.lineno:
        return False
    depth = len(scope.parents[statement])
    return (
        scope.parents[statement] == scope.parents[later][:depth]
        and scope.block[statement] == scope.block[later][: depth + 1]
    )


def withs_around(scope: Scope, line: int) -> list[tuple[ast.stmt, ast.expr]]:
    """The `with` statements of the scope around `line`, innermost first, each with its
    context expressions."""
    statement = scope.statement_at(line)
    if statement is None:
        return []
    chain = [*scope.parents[statement], statement]
    return [
        (s, item.context_expr)
        for s in reversed(chain)
        if isinstance(s, (ast.With, ast.AsyncWith))
        for item in s.items
    ]
