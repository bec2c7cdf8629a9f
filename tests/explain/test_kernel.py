"""`%load_ext helpers` in an IPython shell: cells are watched, an autograd error is explained
with its causal line, other errors keep IPython's traceback, and `import helpers` alone does not
load the explainer's watch."""

from __future__ import annotations

import html
import re

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

import helpers
from tests.support.mutation import entries_outside_mutmut


@pytest.fixture
def shell(monkeypatch):
    shell = InteractiveShell.instance()
    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    shell.shown = shown
    yield shell
    helpers.unload_ipython_extension(shell)
    InteractiveShell.clear_instance()


CELLS = [
    "import torch\nx = torch.randn(3, requires_grad=True)",
    "h = x.sigmoid()\ny = h * h",
    "h.mul_(2)",
    "y.sum().backward()",
]


def test_load_ext_explains_an_in_place_change_made_in_another_cell(shell, capsys):
    shell.run_cell("%load_ext helpers")
    for cell in CELLS:
        shell.run_cell(cell)
    (picture,) = shell.shown
    page = picture.data
    assert "a saved tensor was changed in place" in page
    assert "h.mul_(2)" in page and "h = x.sigmoid()" in page
    assert "<details><summary>traceback</summary>" in page
    assert "modified by an inplace operation" in capsys.readouterr().out  # torch's words stay


def test_a_cell_that_catches_the_error_gets_its_explanation_from_the_cell_s_watch(shell):
    shell.run_cell("%load_ext helpers")
    for cell in CELLS[:3]:
        shell.run_cell(cell)
    caught = "try:\n    y.sum().backward()\nexcept RuntimeError as err:\n    found = explain(err)"
    shell.run_cell("from helpers.explain import explain\n" + caught)
    found = shell.user_ns["found"]
    assert found.family == "inplace_saved" and found.place("changed").code == "h.mul_(2)"
    shell.run_cell("%unload_ext helpers")
    shell.run_cell(caught)
    assert shell.user_ns["found"] is None  # no watch, no records: no cause to name


def test_an_error_that_is_not_autograds_keeps_its_traceback(shell, capsys):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("{}['missing']")
    assert shell.shown == []
    assert "KeyError" in capsys.readouterr().out


def test_without_load_ext_no_cell_is_watched(shell):
    for cell in CELLS:
        shell.run_cell(cell)
    assert shell.shown == []


def test_unload_ext_gives_ipythons_tracebacks_back(shell):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("%unload_ext helpers")
    for cell in CELLS:
        shell.run_cell(cell)
    assert shell.shown == []


def test_two_cells_at_the_same_line_number_are_not_one_loop(shell):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("import torch\nx = torch.randn(3, requires_grad=True)\ny = x.sigmoid() * 2")
    shell.run_cell("y.sum().backward()")
    shell.run_cell("(y * 1).sum().backward()")
    (picture,) = shell.shown
    assert "an earlier backward() already went through" in picture.data
    assert "the step before" not in picture.data


def test_a_cell_run_twice_is_explained_as_a_rerun_first(shell, capsys):
    shell.run_cell("%load_ext helpers", store_history=True)
    shell.run_cell("import torch\nx = torch.randn(3, requires_grad=True)", store_history=True)
    shell.run_cell("y = x.sigmoid() * 2", store_history=True)
    for _ in range(2):
        shell.run_cell("y.sum().backward()", store_history=True)
    assert shell.shown == []  # no autograd family: the re-run is the cause
    assert "This cell ran before" in capsys.readouterr().out


RETAIN_GRAD_COMPILED = """\
def f(x, w):
    h = x @ w
    h.retain_grad()
    return h.sum(), h

compiled = torch.compile(f, backend="aot_eager")
"""


def _loss_of_a_compiled_function(shell, loaded: bool):
    import torch

    torch._dynamo.reset()
    if loaded:
        shell.run_cell("%load_ext helpers")
    shell.run_cell("import torch\nx, w = torch.ones(2, 3), torch.ones(3, 2, requires_grad=True)")
    shell.run_cell(RETAIN_GRAD_COMPILED)
    shell.run_cell("loss, h = compiled(x, w)")  # a later cell: the name holds a compiled function
    loss = shell.user_ns["loss"]
    torch._dynamo.reset()
    return None if loss is None else loss.item()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_a_compiled_function_returns_what_it_returns_unwatched(shell):
    # torch 2.13 compiles another program with any torch function mode on: the loss is None
    assert _loss_of_a_compiled_function(shell, loaded=True) == 12.0
    assert _loss_of_a_compiled_function(shell, loaded=False) == 12.0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_a_cell_that_compiles_is_not_watched_and_others_are(shell):
    from helpers.explain.kernel import compiles

    shell.run_cell("import torch\nf = torch.compile(lambda x: x * 2)\ng = lambda x: f(x) + 1")
    shell.run_cell("model = torch.nn.Sequential(torch.nn.Linear(2, 2))\nmodel.compile()")
    shell.run_cell("wrapped = torch.compile(torch.nn.Linear(2, 2))\nholder = [wrapped]")
    shell.run_cell("outer = torch.nn.Sequential(wrapped)\nplain = torch.nn.Linear(2, 2)")
    ns = shell.user_ns
    assert compiles("torch.compile(model)", ns) and compiles("import torch._dynamo", ns)
    assert compiles("from torch import compile\ncompile(plain)", ns)
    assert compiles("wrapped(x)", ns) and compiles("outer(x)", ns)  # made one, or holds one
    assert compiles("holder[0](x)", ns)  # held in a list
    assert not compiles("plain(x)", ns)
    assert compiles("f(x)", ns) and compiles("g(x)", ns) and compiles("model(x)", ns)
    assert not compiles("torch.nn.Linear(2, 2)(x)", ns) and not compiles("h(x", ns)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_compiles_sees_names_brought_in_earlier_and_models_kept_in_a_dict(shell):
    from helpers.explain.kernel import compiles

    shell.run_cell("import torch\nfrom torch import compile\nplain = torch.nn.Linear(2, 2)")
    shell.run_cell("models = {'fast': torch.compile(torch.nn.Linear(2, 2))}")
    shell.run_cell("def step(x):\n    print(len(x))\n    return plain(x)")
    ns = shell.user_ns
    assert compiles("compile(plain)", ns)  # `compile` imported in an earlier cell
    assert compiles("from torch._dynamo import config", ns)
    assert compiles("models['fast'](x)", ns)  # held in a dict
    assert not compiles("step(x)", ns)  # builtins used, nothing compiled
    assert not compiles("model = Net()", {"Net": torch.nn.Linear})  # a class, not a module


def test_a_pre_run_cell_without_its_information_still_watches_the_cell(shell):
    from helpers.explain.kernel import _LOADED

    shell.run_cell("%load_ext helpers")
    watch, starts, stops = getattr(shell, _LOADED)
    starts()  # an IPython that calls pre_run_cell without an ExecutionInfo
    assert torch.overrides._get_current_function_mode_stack() == [watch]
    stops()
    assert torch.overrides._get_current_function_mode_stack() == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_a_cell_that_runs_unwatched_is_explained_from_the_cells_watched_before(shell):
    shell.run_cell("%load_ext helpers")
    for cell in CELLS[:3]:
        shell.run_cell(cell)
    shell.run_cell("compiled = torch.compile(lambda t: t)\ny.sum().backward()")
    (picture,) = shell.shown
    assert "h.mul_(2)" in picture.data  # the earlier cell's change, from the kernel's watch


def test_a_mode_the_learner_left_on_stays_on(shell):
    import torch

    shell.run_cell("%load_ext helpers")
    shell.run_cell("import torch\ntorch.set_default_device('cpu')")  # pushes a mode, left on
    try:
        assert len(torch.overrides._get_current_function_mode_stack()) == 1
        shell.run_cell("y = torch.ones(2) * 2")
        assert len(torch.overrides._get_current_function_mode_stack()) == 1
    finally:
        torch.set_default_device(None)


def test_a_step_that_raises_leaves_the_next_cell_watched(shell):
    """The watch notes an optimizer's step as one call and looks away from the calls inside it:
    a step that raises must not leave it looking away (here gradients stay off, as inside a
    step, and the next cell changes a saved tensor in place)."""
    shell.run_cell("%load_ext helpers")
    shell.run_cell(
        "import torch\nx = torch.ones(3, requires_grad=True)\nh = x.exp()\ny = h * h\n"
        "optimizer = torch.optim.SparseAdam([x], lr=0.1)\n(x * 2).sum().backward()"
    )
    failed = shell.run_cell("torch.set_grad_enabled(False)\noptimizer.step()")
    assert "SparseAdam does not support dense gradients" in str(failed.error_in_exec)
    shell.run_cell("h.mul_(2)\ntorch.set_grad_enabled(True)")
    shell.run_cell("y.sum().backward()")
    (picture,) = shell.shown
    assert "a saved tensor was changed in place" in picture.data
    assert "h.mul_(2)" in picture.data


@pytest.fixture
def handed(shell, monkeypatch):
    """Each (type, value, traceback lines) the shell is handed to show, in order."""
    found: list = []
    show = shell._showtraceback

    def spy(etype, value, stb):
        found.append((etype, value, entries_outside_mutmut(stb)))
        return show(etype, value, stb)

    monkeypatch.setattr(shell, "_showtraceback", spy)
    return found


def test_an_error_that_is_not_autograds_is_shown_as_without_the_explainer(shell, handed):
    cell = "import torch\ntorch.ones(2, 3) @ torch.ones(2, 3)"  # raised inside a torch call
    shell.run_cell(cell)
    shell.run_cell("%load_ext helpers")
    shell.run_cell(cell)
    (_, bare_value, bare), (etype, value, usual) = handed
    assert usual == bare  # the watch's frames taken out, nothing added
    assert etype is RuntimeError and str(value) == str(bare_value)
    assert len(usual) > 1 and "cannot be multiplied" in usual[-1]
    assert shell.shown == []


@pytest.fixture
def formatted(shell, monkeypatch):
    """Each traceback IPython's formatter makes, in order: (the tb_offset it was given, its
    entries)."""
    found: list = []
    structured = shell.InteractiveTB.structured_traceback

    def spy(*args, tb_offset=None, **kwargs):
        found.append((tb_offset, structured(*args, tb_offset=tb_offset, **kwargs)))
        return found[-1][1]

    monkeypatch.setattr(shell.InteractiveTB, "structured_traceback", spy)
    return found


def test_an_explained_error_shows_torchs_line_and_folds_the_usual_traceback(
    shell, handed, formatted
):
    for cell in CELLS:
        shell.run_cell(cell)
    ((_, _, bare),) = handed
    handed.clear()
    formatted.clear()
    shell.run_cell("%load_ext helpers")
    for cell in CELLS:
        shell.run_cell(cell)
    ((etype, value, stb),) = handed
    assert etype is RuntimeError
    assert stb == [f"RuntimeError: {value}"]  # torch's own words, searchable, nothing else
    ((_, usual),) = formatted
    assert entries_outside_mutmut(usual) == bare  # the watch's frames taken out, nothing added
    (picture,) = shell.shown
    page = picture.data
    folded = page.split("<details><summary>traceback</summary><pre>", 1)[1]
    assert folded.endswith("</pre></details>")
    assert "\x1b[" not in folded  # colours taken out of the text
    assert folded == html.escape(_ANSI.sub("", "\n".join(usual))) + "</pre></details>"
    assert "----&gt; 1 y.sum().backward()" in folded  # escaped, the learner's line in it
    assert page.startswith('<div class="autograd-explanation"')
    explanation = page.split("<details>", 1)[0]
    assert "y.sum().backward()" in explanation  # where it surfaced, from the traceback


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_the_handler_keeps_ipythons_traceback_offset(shell, formatted):
    shell.run_cell("%load_ext helpers")
    shell.run_cell("try:\n    {}['k']\nexcept KeyError as e:\n    err = e")
    err = shell.user_ns["err"]
    formatted.clear()
    shown = shell.CustomTB(KeyError, err, err.__traceback__, tb_offset=2)
    ((offset, usual),) = formatted
    assert offset == 2  # handed on as IPython gave it (set_custom_exc's contract)
    assert shown == usual


def test_load_is_refused_without_a_shell_and_happens_once(shell, handed):
    from helpers.explain.kernel import load, unload

    assert load(None) is False and load(object()) is False
    unload(shell)  # not loaded: nothing to undo
    before = len(shell.events.callbacks["pre_run_cell"])
    assert load(shell) is True and load(shell) is True  # a second %load_ext changes nothing
    assert len(shell.events.callbacks["pre_run_cell"]) == before + 1
    for cell in CELLS:
        shell.run_cell(cell)
    assert len(shell.shown) == 1 and len(handed) == 1  # one watch, one explanation
    assert torch.overrides._get_current_function_mode_stack() == []  # off between cells


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_a_cell_naming_a_list_that_holds_itself_or_a_data_set_is_watched(shell):
    from helpers.explain.kernel import HELD, compiles

    assert shell.run_cell("import torch\nloop = []\nloop.append(loop)").success
    made = shell.run_cell(
        f"data = [torch.ones(1)] * {HELD} + [torch.compile(torch.nn.Linear(1, 1))]"
    )
    assert made.success  # run alone, torch.compile's first import warns: not an error here
    assert not compiles("loop[0]", shell.user_ns)  # one level looked at: no recursion
    assert not compiles("data[0]", shell.user_ns)  # past the first HELD items: not looked at
