"""helpers.rerun: what a learner is told when a cell runs twice or out of order (no kernel here;
tests/test_rerun_notebooks.py runs the course's notebooks twice, cell by cell)."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch

from helpers.language import set_language
from helpers.rerun import explain

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
        "already freed the tensors that graph's nodes saved: backward() frees each node's saved "
        "tensors once it has used them (the nodes stay), unless retain_graph=True (notebook 05, "
        "05_freeing_the_graph.ipynb, shows it).",
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
    assert "（笔记本 05，" in lines[2] and "notebook" not in lines[2]
    assert lines[-1].startswith("要重新运行它，请再次运行 In [2]")


class Compiler:
    _filename_map: ClassVar[dict[str, int]] = {"/tmp/ipykernel_9/cell.py": 3}


class Shell:
    """What helpers.rerun asks of IPython's shell: its compiler's cell files and a place for the
    handler; and what IPython hands the handler: its traceback maker, its namespace, its way to
    show."""

    compile = Compiler()

    def __init__(self, history=()):
        self.handlers = []
        self.user_ns = {"In": list(history)}
        self.shown = []
        self.asked = []
        self.InteractiveTB = self  # IPython's traceback maker, played by the shell itself

    def set_custom_exc(self, exceptions, handler):
        self.handlers.append((exceptions, handler))

    def structured_traceback(self, etype, value, tb, tb_offset=None):
        self.asked.append((etype, value, tb, tb_offset))
        return [f"usual traceback of {etype.__name__}"]

    def _showtraceback(self, etype, value, lines):
        self.shown.append((etype, value, lines))


def test_a_cell_is_a_file_the_kernel_compiled_or_named_like_one(monkeypatch):
    from helpers.rerun import _cell_file

    assert _cell_file("<ipython-input-3-abc>") and _cell_file("/tmp/ipykernel_1/12.py")
    assert not _cell_file("/home/me/train.py")
    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())  # in a kernel, its own list
    assert _cell_file("/tmp/ipykernel_9/cell.py")
    assert not _cell_file("/tmp/ipykernel_1/12.py") and not _cell_file("<ipython-input-3-abc>")


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


def test_a_cell_run_again_is_found_however_early_it_first_ran(ns):
    cell = "assert w.sum() == 3"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, ["", cell, "x = 1", cell])
    assert "This cell ran before, as In [1]" in lines[3]


def test_a_cell_that_failed_the_first_time_too_looks_further_back(ns):
    cell = "assert w.grad is None"
    exec("loss.backward()", ns)
    error, tb = failing(cell, ns)
    history = [*HISTORY, "loss.backward()", "loss.backward()", cell, cell]
    lines, _ = explain(error, tb, history, failed={6})  # In [6] raised as well
    assert not any(line.startswith("This cell ran before") for line in lines)
    assert "Cell In [5] ran the same code as In [4]" in lines[3]


def test_another_cell_run_twice_counts_only_when_the_failing_line_uses_what_it_made(ns):
    twice = "loss = (w * 3).sum()\nloss.backward()"
    exec(twice, ns)
    cell = "assert w.grad is None"
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, ["", twice, twice, "x = 1", cell])
    assert "Cell In [2] ran the same code as In [1]" in lines[3]
    lines, _ = explain(error, tb, ["", "x = 1", "x = 1", cell])  # x: not what it reads
    assert not any(line.startswith("Cell In") for line in lines)


def test_the_cell_to_run_from_follows_every_name_the_cell_reads(ns):
    cell = "v = w * 2\nassert x == 4"  # fails on x; v is made from w, made before x
    error, tb = failing(cell, {"w": 1, "x": 3})
    lines, _ = explain(error, tb, ["", "w = torch.ones(2)", "x = 3", cell])
    assert lines[-1].startswith("To run it again, run In [1] again, the cell that makes `w`")


def test_of_two_names_one_cell_makes_the_failing_line_is_named_with_its_line(ns):
    cell = "print(a)\nassert b == 3"
    error, tb = failing(cell, {"a": 1, "b": 2})
    lines, _ = explain(error, tb, ["", "a = 1\nb = 2", cell])
    assert "run In [1] again, the cell that makes `b` (b = 2)" in lines[-1]


def test_the_name_backward_starts_from_is_followed_even_when_the_cell_remakes_it(ns):
    cell = "loss = (w * 3).sum()\nloss.backward()\nloss.backward()"
    error, tb = failing(cell, ns)
    history = ["", "import torch", "loss = torch.ones(1, requires_grad=True) * 2", "w = 1", cell]
    lines, _ = explain(error, tb, history)
    assert "run In [2] again, the cell that makes `loss`" in lines[-1]
    lines, _ = explain(error, tb, [*history, cell])  # run twice: its first run is no maker
    assert "run In [2] again, the cell that makes `loss`" in lines[-1]


def test_the_name_backward_starts_from_comes_first_and_the_cells_own_names_are_not_followed(ns):
    made = "h = 1\ny = (w * 2).sum()"
    exec(made, ns)
    cell = "z = h\ny.backward()\nprint(h, y.backward())"  # z: made here (and in In [1])
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, ["", "z = 0", made, cell])
    assert "run In [2] again, the cell that makes `y`" in lines[-1]


def test_a_name_met_again_in_the_chain_does_not_end_it(ns):
    cell = "assert y + q == 0"  # y <- x; q <- y and r; r was made first
    error, tb = failing(cell, {"y": 2, "q": 3})
    history = ["", "r = 1", "x = 2", "y = x", "q = y + r", cell]
    lines, _ = explain(error, tb, history)
    assert "run In [1] again, the cell that makes `r`" in lines[-1]


def test_a_cell_run_twice_counts_through_what_made_its_names_before_it(ns):
    twice = "b = b * 2"  # b was made from a, which the failing line reads
    cell = "assert a == 2"
    error, tb = failing(cell, {"a": 1})
    lines, _ = explain(error, tb, ["", "a = 1", "b = a", twice, twice, cell])
    assert "Cell In [4] ran the same code as In [3]" in lines[3]


@pytest.mark.parametrize(
    "cell",
    [
        "for _ in loss.backward():\n    pass",  # the line of a loop's header
        "y = (\n    loss.backward())",  # the second line of a statement
        "x = 1; loss.backward()",  # the second statement on the line
    ],
)
def test_the_failing_statement_is_found_on_any_line_it_spans(cell, ns):
    exec("loss.backward()", ns)
    error, tb = failing(cell, ns)
    lines, _ = explain(error, tb, [*HISTORY, cell])
    assert "walked the graph of `loss` a second time" in lines[2]


def handle(shell, error, tb):
    """What the handler shows; it must pass IPython what it was handed, and show what it says."""
    from helpers.rerun import handler

    shown = handler(shell, type(error), error, tb, tb_offset=2)
    assert shell.asked[-1] == (type(error), error, tb, 2)
    assert shell.shown[-1] == (type(error), error, shown)
    return shown


def test_the_handler_shows_the_explanation_instead_of_or_before_the_traceback(ns):
    exec("loss.backward()", ns)
    error, tb = failing("loss.backward()", ns)
    shell = Shell([*HISTORY, "loss.backward()", "loss.backward()"])
    shown = handle(shell, error, tb)
    assert shown[:2] == [
        "\x1b[1;31mWhat happened:\x1b[0m",
        "RuntimeError: Trying to backward "
        "through the graph a second time (or directly access saved tensors after they have already "
        "been freed).",
    ]
    assert shown[-1].startswith("To run it again") and "usual traceback" not in shown[-1]
    cell = "assert w.sum() == 3"
    error, tb = failing(cell, ns)
    shown = handle(Shell([*HISTORY, cell]), error, tb)  # a check: the traceback follows
    assert shown[-2:] == ["", "usual traceback of AssertionError"]
    error, tb = failing("undefined_name", ns)
    assert handle(Shell([*HISTORY, "undefined_name"]), error, tb) == [
        "usual traceback of NameError"
    ]


def test_the_handler_remembers_which_cells_failed_and_never_fails_itself(ns):
    cell = "w.grad * 2"
    error, tb = failing(cell, ns)
    shell = Shell([*HISTORY, cell])
    assert handle(shell, error, tb) == ["usual traceback of TypeError"]  # In [4] failed
    shell.user_ns["In"] = [*HISTORY, cell, cell]
    shown = handle(shell, error, tb)  # its first run failed too: it changed nothing
    assert not any("This cell ran before" in line for line in shown)
    shell.user_ns["In"] = [None, None, cell]  # no cell code the explainer can read
    assert handle(shell, error, tb) == ["usual traceback of TypeError"]
    other = Shell([*HISTORY, cell, cell])  # another kernel: its cells have not failed
    assert any("This cell ran before" in line for line in handle(other, error, tb))
    broken = Shell(["", None, cell, cell])  # the explainer fails on a history it cannot read
    assert handle(broken, error, tb) == ["usual traceback of TypeError"]
    del shell.user_ns["In"]  # a shell without a history: nothing to explain
    assert handle(shell, error, tb) == ["usual traceback of TypeError"]
