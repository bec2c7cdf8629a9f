"""The learner's source read as Python (`helpers.explain.scopes`): the function a frame runs,
the statements binding a name there (tuple targets included), loops, `with` blocks, and which
binding has surely run before a loop."""

from __future__ import annotations

import ast
import linecache
import sys

from helpers.explain import scopes

SOURCE = '''\
def initial():
    h, c = 0, 0
    return h, c


def train(batches):
    h, c = initial()
    if batches:
        y = 1
    else:
        y = 2
    with open("x") as f:
        for x in batches:
            out, (h, c) = step(x, (h, c))  # a tuple target
            h += 1
    return sys._getframe()
'''


def _scope():
    """The scope of train()."""
    return scopes.Scope(ast.parse(SOURCE).body[1], SOURCE.splitlines(True))


def _statement(scope, line):
    return next(s for s in scope.statements() if s.lineno == line)


def test_a_frame_gets_the_scope_of_its_own_function(tmp_path):
    path = str(tmp_path / "learner.py")
    linecache.cache[path] = (len(SOURCE), None, SOURCE.splitlines(True), path)
    code = compile(SOURCE, path, "exec")
    namespace = {"sys": sys, "step": lambda x, state: (x, state), "open": lambda _: _Null()}
    exec(code, namespace)
    scope = scopes.scope_of(namespace["train"]([1]))
    assert isinstance(scope.node, ast.FunctionDef) and scope.node.name == "train"
    # the binding of h in initial() is another scope's
    assert [s.lineno for s in scope.statements() if scopes.binds(s, "h")] == [7, 14, 15]
    del linecache.cache[path]


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


def test_bindings_include_tuple_targets_and_reads_see_the_value_only():
    scope = _scope()
    unpacking = _statement(scope, 14)
    assert scopes.binds(unpacking, "h") and scopes.binds(unpacking, "c")
    assert scopes.binds(unpacking, "out") and not scopes.binds(unpacking, "x")
    assert scopes.reads(unpacking, "h") and not scopes.reads(unpacking, "out")
    assert scopes.reads(_statement(scope, 15), "h")  # h += 1 reads h
    assert scopes.binds(_statement(scope, 13), "x") and scopes.binds(_statement(scope, 12), "f")


def test_loops_and_withs_around_a_line():
    scope = _scope()
    assert [s.lineno for s in scope.loops_around(14)] == [13]
    assert scope.loops_around(7) == []
    assert [s.lineno for s, _ in scopes.withs_around(scope, 14)] == [12]


def test_a_binding_dominates_a_loop_only_when_it_has_surely_run_before():
    scope = _scope()
    loop = _statement(scope, 13)
    assert scopes.dominates(scope, _statement(scope, 7), loop)
    assert not scopes.dominates(scope, _statement(scope, 9), loop)  # one branch of an if
    assert not scopes.dominates(scope, _statement(scope, 14), loop)  # inside the loop itself
    assert not scopes.dominates(scope, _statement(scope, 14), _statement(scope, 7))  # after it


def test_only_an_assignment_alone_on_its_line_may_be_replaced():
    scope = _scope()
    assert scopes.single_line(scope, _statement(scope, 14))
    assert not scopes.single_line(scope, _statement(scope, 13))  # a loop
    one_line = scopes.Scope(ast.parse("a = 1; b = 2\n"), ["a = 1; b = 2\n"])
    assert not scopes.single_line(one_line, one_line.statements()[0])


def test_a_line_of_a_file_gets_the_innermost_function_around_it(tmp_path):
    path = str(tmp_path / "learner.py")
    linecache.cache[path] = (len(SOURCE), None, SOURCE.splitlines(True), path)
    assert scopes.scope_at(path, 14).node.name == "train"
    assert scopes.scope_at(path, 2).node.name == "initial"
    assert isinstance(scopes.scope_at(path, 4).node, ast.Module)  # between the functions
    del linecache.cache[path]
    assert scopes.scope_at(path, 1) is None  # no source


def test_source_that_cannot_be_read_gives_no_scope():
    frame = sys._getframe()
    code = compile("import sys\nframe = sys._getframe()", "<no file>", "exec")
    namespace = {}
    exec(code, namespace)
    assert scopes.scope_of(namespace["frame"]) is None
    assert scopes.scope_of(frame) is not None  # this test file can be read
