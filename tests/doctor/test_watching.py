"""The course's watchers (the explainer's watch and the doctor) leave what a learner sees as it is
without them: warnings at the learner's line, once per line; anomaly mode's forward traceback;
what torch.compile compiles."""

from __future__ import annotations

import contextlib
import gc
import traceback
import warnings
import weakref

import pytest
import torch
from torch import nn

from helpers.doctor import doctor
from helpers.doctor.watching import bare_traceback
from helpers.explain.watch import Watch
from tests.support.mutation import frames_outside_mutmut


def _doctor():
    return doctor(nn.Linear(2, 2))


#: The explainer's watch lives as long as the kernel, from cell to cell: one for every test.
WATCH = Watch()
#: Each way a learner's code can run: bare, and under each watcher.
WAYS = {"bare": contextlib.nullcontext, "explainer": lambda: WATCH, "doctor": _doctor}


def _warned(way) -> list[tuple[str, int, str]]:
    """The warnings two learner lines raise, shown as Python's default filter shows them: once
    per line (a C++ warning of torch's, a Python one with stacklevel=2, each twice)."""
    x = torch.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        with way():
            for _ in range(2):
                torch.tensor(x)  # C++: "To copy construct from a tensor, ..."
                torch.tensor(x)  # the same warning from another line: shown again
                nn.functional.softmax(x)  # Python, stacklevel=2: "Implicit dimension choice"
    return [(w.filename, w.lineno, str(w.message)[:20]) for w in caught]


@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_warnings_are_the_learners_line_once_per_line(way):
    bare = _warned(WAYS["bare"])
    assert len(bare) == 3 and bare[0][0] == __file__
    assert _warned(WAYS[way]) == bare


def _forward_traceback(way) -> list[str]:
    x = torch.ones(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is on
        with torch.autograd.detect_anomaly(), way():
            for _ in range(1):
                h = nn.functional.softmax(x.exp(), dim=0)  # a C function, then a Python one
                top, _ = torch.max(x * 2, dim=0)  # a tuple of results
                _, lower, _ = torch.linalg.lu(x.diag() + 1)  # the first has no graph
                constant = torch.ones(2) * 2  # no graph: nothing stored
    assert constant.grad_fn is None
    return (
        h.grad_fn.metadata["traceback_"]
        + h.grad_fn.next_functions[0][0].metadata["traceback_"]
        + top.grad_fn.metadata["traceback_"]
        + lower.grad_fn.metadata["traceback_"]
    )


@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_anomaly_mode_names_the_learners_forward_line(way):
    bare, watched = (_forward_traceback(WAYS[w]) for w in ("bare", way))  # from one line
    assert any("h = nn.functional.softmax(x.exp(), dim=0)" in entry for entry in bare)
    assert "_, lower, _ = torch.linalg.lu(x.diag() + 1)" in bare[-1]
    assert any("top, _ = torch.max(x * 2, dim=0)" in entry for entry in bare)
    assert watched == bare


def _compiled_graphs(way) -> tuple[int, list[float]]:
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return (x.sin() * 2).sum()

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=count)
    x = torch.arange(3.0, requires_grad=True)
    with way():
        loss = compiled(x)
        loss.backward()
    torch._dynamo.reset()
    return len(graphs), x.grad.tolist()


@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_torch_compile_compiles_the_same_graph(way):
    bare = _compiled_graphs(WAYS["bare"])
    assert bare[0] == 1
    assert _compiled_graphs(WAYS[way]) == bare


def _error_frames(way, make_error) -> list[tuple[str, int, str]]:
    try:
        with way():
            make_error()
    except (IndexError, RuntimeError) as err:
        tb = bare_traceback(err.__traceback__)
    return frames_outside_mutmut([(f.filename, f.lineno, f.name) for f in traceback.extract_tb(tb)])


ERRORS = {
    "a C function": lambda: torch.ones(2) @ torch.ones(3),
    "a Python function": lambda: nn.functional.softmax(torch.ones(2), dim=5),
}


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_an_error_in_torch_shows_the_traceback_it_shows_bare(way, error):
    bare, watched = (_error_frames(WAYS[w], ERRORS[error]) for w in ("bare", way))
    assert bare[-1][2] == "<lambda>" or bare[-1][0].endswith("functional.py")
    assert watched == bare


class _Packed:
    """What a saved tensor is packed into: alive while the graph holding it is."""


def _saved_alive_after(way, retain_graph: bool) -> int:
    packed = []

    def pack(t):
        packed.append(weakref.ref(box := _Packed()))
        box.t = t
        return box

    x = torch.ones(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.t), way():
        loss = (x.sin() * x).sum()
        loss.backward(retain_graph=retain_graph)
        del loss
    gc.collect()
    return sum(ref() is not None for ref in packed)


@pytest.mark.parametrize("retain_graph", [True, False])
@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_a_graph_nothing_refers_to_is_freed_as_bare(way, retain_graph):
    assert _saved_alive_after(WAYS["bare"], retain_graph) == 0
    assert _saved_alive_after(WAYS[way], retain_graph) == 0


def _inference_update():
    with torch.inference_mode():
        y = torch.ones(2)
    y.requires_grad_()  # "Setting requires_grad=True on inference tensor outside InferenceMode"


def _no_grad_view_update():
    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = w[0]
    with torch.no_grad():
        w.mul_(2)
    v.mul_(2)  # "A view was created in no_grad mode and its base ... modified inplace"


def _no_grad_view_update_allowed():
    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        w[0].mul_(2)
        w[1].mul_(2)
    return w.tolist()


def _outcome(way, step):
    try:
        with way():
            return "returned", step()
    except RuntimeError as err:
        return "raised", str(err)


@pytest.mark.parametrize(
    "step", [_inference_update, _no_grad_view_update, _no_grad_view_update_allowed]
)
@pytest.mark.parametrize("way", ["explainer", "doctor"])
def test_what_torch_refuses_or_allows_bare_it_refuses_or_allows_watched(way, step):
    assert _outcome(WAYS[way], step) == _outcome(WAYS["bare"], step)


def test_two_files_with_the_same_code_at_the_same_line_are_told_apart():
    # code objects compare equal across files: both watchers on, as in a notebook's cells
    x = torch.ones(3)
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with WATCH, _doctor():
            for cell in ("<cell a>", "<cell b>"):
                exec(compile("torch.tensor(x)\n", cell, "exec"), {"torch": torch, "x": x})
    seen = [(w.filename, w.lineno) for w in caught]
    assert seen == [("<cell a>", 1), ("<cell b>", 1)]


def test_a_call_made_as_no_frame_passes_its_arguments():
    from helpers.doctor.watching import call

    made = call(torch.add, (torch.ones(2), torch.ones(2)), {"alpha": 2}, None)
    assert made.tolist() == [3.0, 3.0]


def test_a_call_site_is_made_once_and_kept():
    import sys

    from helpers.doctor import watching

    frame = sys._getframe()
    before = dict(watching._AS_CALLER)
    made = []
    for _ in range(2):  # one site: the same instruction of this frame
        watching.call(torch.add, (torch.ones(1), 1), {}, frame)
        made.append({k: v for k, v in watching._AS_CALLER.items() if k not in before})
    assert len(made[0]) == 1 and made[1] == made[0]  # the same function, not made again


def test_grad_fn_is_none_where_reading_it_raises():
    from helpers.doctor.watching import grad_fn

    x = torch.ones(3, requires_grad=True)
    assert type(grad_fn(x * 2)).__name__ == "MulBackward0" and grad_fn(3) is None
    base = x * 1
    with torch.no_grad():
        view = base[:2]
    base.mul_(2)
    with pytest.raises(RuntimeError):
        view.grad_fn  # noqa: B018 (torch raises on reading it)
    assert grad_fn(view) is None
