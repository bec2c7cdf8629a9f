"""helpers.rerun: what a learner is told when a cell runs twice or out of order (no kernel here;
tests/test_rerun_notebooks.py runs the course's notebooks twice, cell by cell)."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch

from helpers.language import set_language
from helpers.rerun import explain, install

CELL = "/tmp/ipykernel_1/{}.py"


def failing(source: str, namespace: dict) -> tuple[BaseException, object]:
    """Run `source` as a notebook cell would (a cell's file name); the error it raises."""
    code = compile(source, CELL.format(abs(hash(source))), "exec")
    try:
        exec(code, namespace)
    except Exception as err:
        return err, err.__traceback__
    raise AssertionError("the cell did not fail")


@pytest.fixture
def ns():
    namespace = {"torch": torch}
    exec("w = torch.ones(2, requires_grad=True)\nloss = (w * 3).sum()", namespace)
    return namespace


HISTORY = [
    "",
    "import torch",
    "w = torch.ones(2, requires_grad=True)",
    "loss = (w * 3).sum()  # the graph",
]


def test_backward_twice_says_what_why_and_which_cell(ns):
    cell = "loss.backward()\nprint(w.grad)"
    exec("loss.backward(retain_graph=False)", ns)
    error, tb = failing(cell, ns)
    lines, complete = explain(error, tb, [*HISTORY, cell, cell])
    assert complete  # the explanation replaces the traceback
    assert lines == [
        "What happened:",
        "RuntimeError: Trying to backward through the graph a second time (or directly access "
        "saved tensors after they have already been freed).",
        "backward() walked the graph of `loss` a second time, but the first backward() had "
        "already freed what that graph saved: backward() frees a graph as it walks it, unless "
        "retain_graph=True (notebook 05, 05_freeing_the_graph.ipynb, shows it).",
        "This cell ran before, as In [4], and its first run used up or changed what it works on.",
        "To run it again, run In [2] again, the cell that makes `w` (w = torch.ones(2, "
        "requires_grad=True)), and the cells after it, in order; or restart the kernel and Run "
        "All.",
    ]


def test_the_chain_goes_back_to_the_earliest_cell_the_failing_line_depends_on(ns):
    history = ["", "import torch", "w = torch.ones(2)", "x = 3", "v = w * 2", "loss = v.sum()"]
    cell = "assert x == 4"
    error, tb = failing(cell, {"x": 3})
    lines, _ = explain(error, tb, [*history, cell])
    assert lines[-1].startswith(
        "To run it again, run In [3] again, the cell that makes `x` (x = 3)"
    )
    exec("loss = (w * 3).sum()", ns)
    cell = "loss.backward()\nloss.backward()"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, [*history, cell])
    assert "the cell that makes `w` (w = torch.ones(2))" in lines[-1]  # loss <- v <- w
    assert "In [2] again" in lines[-1]


def test_a_failed_check_is_shown_with_what_it_expected(ns):
    cell = "total = 1 + 1\nassert total == 3, 'not three'"
    error, tb = failing(cell, ns)
    lines, complete = explain(error, tb, [*HISTORY, cell])
    assert not complete  # the usual traceback follows
    assert lines[:3] == [
        "What happened:",
        "AssertionError: not three",
        "The check that failed: assert total == 3, 'not three'",
    ]
    assert lines[3] == (
        "To run it again, restart the kernel and Run All, or run the cells above it again, in "
        "order."
    )


def test_another_cell_run_twice_is_named(ns):
    cell = "assert w.grad is None"
    exec("loss.backward()", ns)
    error, tb = failing(cell, ns)
    history = [*HISTORY, "loss.backward()", "loss.backward()", cell]
    lines, _ = explain(error, tb, history)
    assert (
        "Cell In [5] ran the same code as In [4]: a cell ran twice, and what the cells share "
        "changed."
    ) in lines
    assert any(line.startswith("A second run meets the state the first one left") for line in lines)


def test_the_learners_own_error_keeps_its_traceback(ns):
    cell = "undefined_name + 1"
    error, tb = failing(cell, ns)
    assert explain(error, tb, [*HISTORY, cell]) is None
    assert explain(error, tb, [""]) is None  # no history at all


def test_an_error_of_a_rerun_cell_is_explained_even_when_not_an_assert(ns):
    cell = "w.grad * 2"
    error, tb = failing(cell, ns)  # TypeError: w.grad is None
    lines, complete = explain(error, tb, [*HISTORY, cell, cell])
    assert not complete and lines[1].startswith("TypeError: unsupported operand")
    assert "This cell ran before, as In [4]" in lines[2]


@pytest.mark.parametrize(
    ("line", "root"),
    [
        ("y.sum().backward()", "y"),
        ("torch.autograd.grad(out, x)", "out"),
        ("f2.backward(ff2.grad)", "f2"),
        ("torch.autograd.backward(loss)", "loss"),
        ("autograd.grad(out, x)", "out"),  # from torch import autograd
        ("print(x, y.backward())", "y"),  # a call around it is not where backward starts
        ("torch.autograd.gradcheck(f, x)", None),  # autograd, but no backward
    ],
)
def test_the_name_backward_starts_from(line, root):
    import ast

    from helpers.rerun import _backward_root

    assert _backward_root(ast.parse(line).body[0]) == root


def test_the_explanation_speaks_the_notebooks_language(ns):
    cell = "loss.backward()"
    exec("loss.backward()", ns)
    error, tb = failing(cell, ns)
    set_language("zh")
    try:
        lines, _ = explain(error, tb, [*HISTORY, cell, cell])
    finally:
        set_language("en")
    assert lines[0] == "发生了什么："
    assert lines[-1].startswith("要重新运行它，请再次运行 In [2]")


def test_install_outside_a_kernel_does_nothing():
    assert install() is False


def test_install_sets_one_handler_once():
    calls = []

    class Shell:
        def set_custom_exc(self, exceptions, handler):
            calls.append((exceptions, handler))

    shell = Shell()
    assert install(shell) and install(shell)
    assert len(calls) == 1 and calls[0][0] == (Exception,)


class Compiler:
    _filename_map: ClassVar[dict[str, int]] = {"/tmp/ipykernel_9/cell.py": 3}


class Kernel:
    """What helpers.rerun asks of IPython's shell: its compiler's cell files, its handler."""

    compile = Compiler()

    def __init__(self):
        self.handlers = []

    def set_custom_exc(self, exceptions, handler):
        self.handlers.append((exceptions, handler))


def test_a_cell_is_a_file_the_kernel_compiled_or_named_like_one(monkeypatch):
    from helpers.rerun import _cell_file

    assert _cell_file("<ipython-input-3-abc>") and _cell_file("/tmp/ipykernel_1/12.py")
    assert not _cell_file("/home/me/train.py")
    monkeypatch.setattr("IPython.get_ipython", lambda: Kernel())  # in a kernel, its own list
    assert _cell_file("/tmp/ipykernel_9/cell.py")
    assert not _cell_file("/tmp/ipykernel_1/12.py") and not _cell_file("<ipython-input-3-abc>")


def test_install_finds_the_kernel_it_runs_in(monkeypatch):
    kernel = Kernel()
    monkeypatch.setattr("IPython.get_ipython", lambda: kernel)
    assert install() is True
    ((exceptions, handler),) = kernel.handlers
    assert exceptions == (Exception,) and callable(handler)
    assert install(object()) is False  # a shell that takes no handler


def test_an_error_without_words_is_named_by_its_type(ns):
    cell = "assert w.sum() == 3"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, ["", cell])  # the first cell: a history of one
    assert lines[:2] == ["What happened:", "AssertionError"]


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("a" * 80 + ". More.", "a" * 80 + ". More."),  # short: whole
        ("b" * 97 + ". d", "b" * 97 + ". d"),  # 100 characters: whole
        ("c" * 98 + ". d", "c" * 98 + "."),  # 101: cut after its first sentence
        ("e" * 99 + " no sentence ends", "e" * 99 + " no sentence ends"),
    ],
)
def test_a_long_message_is_cut_at_its_first_sentence(message, shown, ns):
    cell = f"assert False, {message!r}"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, [*HISTORY, cell])
    assert lines[1] == f"AssertionError: {shown}"


def test_only_the_backward_error_is_told_as_one(ns):
    cell = "torch.ones(2) @ torch.ones(3)"
    error, tb = failing(cell, ns)  # a RuntimeError of another kind, in a cell run again
    lines, complete = explain(error, tb, [*HISTORY, cell, cell])
    assert not complete and not any("walked the graph" in line for line in lines)


def test_a_backward_error_from_no_cell_line_names_no_graph(ns):
    exec("loss.backward()", ns)
    error, _ = failing("loss.backward()", ns)
    lines, complete = explain(error, None, [*HISTORY, "loss.backward()"])  # no traceback
    assert complete and "walked the graph of ? a second time" in lines[2]


def test_an_assert_outside_the_cells_lines_is_the_learners_own(ns):
    assert explain(AssertionError("x"), None, [*HISTORY, "f()"]) is None


def test_a_check_that_fails_in_a_function_or_a_loop_is_shown_at_the_cells_line(ns):
    cell = "def check():\n    assert False\n\ncheck()"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, [*HISTORY, cell])
    assert lines[2] == "The check that failed: check()"
    cell = "for i in range(2):\n    assert i == 5,\\\n        'no'"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, [*HISTORY, cell])
    assert lines[2] == "The check that failed: assert i == 5,\\ 'no'"
