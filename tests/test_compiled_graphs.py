"""helpers.compiled_graphs: the graphs torch.compile traces, what they keep, and graph breaks."""

from __future__ import annotations

import functools
import logging
import re
import warnings

import pytest
import torch

from helpers.compiled_graphs import (
    SURVIVAL_CASES,
    autograd_survival,
    capture,
    compile_report,
    graph_picture,
    op_names,
    saved_bytes,
)


def sin_cos(x):
    return torch.cos(torch.sin(x)).sum()


@pytest.fixture
def x():
    return torch.randn(100, requires_grad=True)


def test_the_default_partition_keeps_what_eager_autograd_saves(x):
    graphs = capture(sin_cos, x)
    assert graphs.saved == ["primals_1", "sin"] and saved_bytes(graphs) == 2 * 100 * 4
    assert graphs.events == ["forward compiled", "backward called", "backward compiled"]
    assert op_names(graphs.forward) == ["sin", "cos", "sum"]
    assert op_names(graphs.backward) == ["expand", "sin", "neg", "mul", "cos", "mul"]
    torch.testing.assert_close(x.grad, -torch.sin(torch.sin(x)) * torch.cos(x))  # it ran


def test_the_min_cut_partition_recomputes_sin_in_the_backward(x):
    graphs = capture(sin_cos, x, partition="min-cut")
    assert graphs.saved == ["primals_1"] and saved_bytes(graphs) == 100 * 4
    assert op_names(graphs.backward).count("sin") == 2


def test_outputs_beyond_the_first_are_what_is_kept(x):
    def two(x):
        s = torch.sin(x)
        return s.sum() + s.cos().sum()

    kept = capture(two, x).saved
    assert "primals_1" in kept and len(kept) >= 2


def test_the_picture_marks_the_kept_values_and_has_a_text_form(x):
    graphs = capture(sin_cos, x)
    picture = graph_picture(graphs.forward, "fw", graphs.saved)
    text = picture.text()
    assert text.splitlines()[0] == "fw:"
    assert "  sin = sin(primals_1)  [saved for backward]" in text
    assert "  cos = cos(sin)\n" in text and "output(sum_1, primals_1, sin)" in text
    assert 'sin [label=sin fillcolor=orange]' in picture.source
    assert 'cos [label=cos fillcolor=lightgrey]' in picture.source
    assert repr(picture) == text and "image/svg+xml" in picture._repr_mimebundle_()


FIRST_BREAK = """
import json, torch
from helpers.compiled_graphs import compile_report

def reads(x):
    return x * x.sum().item()

print(json.dumps(compile_report(reads, torch.ones(3))))
"""


def test_compile_report_counts_torchs_graph_break_and_keeps_dynamo_quiet(capfd):
    """In a fresh interpreter: torch warns of a kind of graph break once per process, so only
    the process's first break has something to say (another test may have broken first here)."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FIRST_BREAK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["graphs"] == 2 and report["graph breaks"] == 1
    assert "item" in report["reasons"][0] and report["dynamo said"]  # the first break warns
    assert all(isinstance(line, str) and line for line in report["dynamo said"])
    assert capfd.readouterr().err == ""
    clean = compile_report(sin_cos, torch.ones(3))
    assert clean == {"graphs": 1, "graph breaks": 0, "reasons": [], "dynamo said": []}


def test_what_survives_compilation_on_this_release():
    rows = {r["case"]: r for r in autograd_survival()}
    assert list(rows) == list(SURVIVAL_CASES)
    assert rows["a tensor hook that appends to a list"]["graph breaks"] == 1
    assert rows["a module's full backward hook"]["graphs"] == 0
    assert rows["reading an intermediate's .grad"]["same as eager"] is False
    assert rows["a tensor created with requires_grad=True inside"]["same as eager"] is True
    assert all(r["first reason"] == "-" for r in rows.values() if r["graph breaks"] == 0)


def test_a_case_can_be_run_alone_and_eager_runs_are_real():
    (row,) = autograd_survival(["a tensor created with requires_grad=True inside"])
    assert row["graphs"] == 1
    eager, _, _ = SURVIVAL_CASES["a tensor created with requires_grad=True inside"](lambda f: f)
    assert eager == [2.0, 2.0, 2.0]
    retained, _, _ = SURVIVAL_CASES["retain_grad() on an intermediate"](lambda f: f)
    assert retained == [[1.0, 1.0], [1.0, 1.0]]


def test_bad_input_says_what_to_pass(x):
    with pytest.raises(ValueError, match="partition must be one of"):
        capture(sin_cos, x, partition="fast")
    with pytest.raises(TypeError, match="needs a function to compile"):
        capture(3, x)
    with pytest.raises(RuntimeError, match="no forward/backward pair"):
        capture(lambda t: t.detach().sum(), x)


def test_each_case_shows_what_eager_autograd_gives():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading a non-leaf's .grad warns (notebook 01)
        eager = {name: case(lambda f: f)[0] for name, case in SURVIVAL_CASES.items()}
    assert eager == {
        "retain_grad() on an intermediate": [[1.0, 1.0], [1.0, 1.0]],
        "a tensor hook (no side effect)": [[4.0, 4.0]] * 3,  # the hook doubles x^T @ ones
        "a tensor hook that appends to a list": (1, [[2.0, 2.0]] * 3),
        "a module's full backward hook": 1,
        "reading an intermediate's .grad": 12.0,  # h.grad is None eagerly: nothing added
        "a tensor created with requires_grad=True inside": [2.0, 2.0, 2.0],
    }


def test_a_graph_break_has_a_reason_in_the_table():
    (row,) = autograd_survival(["a tensor hook that appends to a list"])
    assert row["graph breaks"] == 1 and row["first reason"] not in ("", "-")
    assert "\\n" not in row["first reason"] and "\n" not in row["first reason"]


def test_op_names_are_short_for_aten_and_python_targets():
    import operator

    from helpers.compiled_graphs import _short

    assert _short(torch.ops.aten.sin.default) == "sin"
    assert _short(torch.ops.aten.tanh_backward.default) == "tanh_backward"
    assert _short(operator.getitem) == "getitem"
    assert _short("aten.mm.default") == "mm"


def test_the_picture_draws_inputs_operations_and_the_output_in_their_colours(x):
    graphs = capture(sin_cos, x)
    picture = graph_picture(graphs.backward, "bw")
    assert "primals_1 [label=primals_1 fillcolor=lightblue]" in picture.source
    assert "tangents_1 [label=tangents_1 fillcolor=lightblue]" in picture.source
    assert "output [label=output fillcolor=darkolivegreen1]" in picture.source
    assert "\n  tangents_1 = tangents_1\n" in picture.text()  # an input: no arguments
    assert "  output = output(mul_1)" in picture.text()


def test_what_cannot_be_captured_is_said_whole(x):
    with pytest.raises(TypeError, match=r"^capture\(\) needs a function to compile, not an int$"):
        capture(3, x)
    with pytest.raises(RuntimeError) as caught:
        capture(lambda t: t.detach().sum(), x)
    assert str(caught.value) == (
        "<lambda> returned no tensor that requires grad, so there is no forward/backward pair to "
        "capture: return a loss computed from an input that requires grad"
    )

    def same(t):
        return t

    with pytest.raises(RuntimeError) as caught:
        capture(same, torch.tensor(2.0, requires_grad=True))
    assert str(caught.value) == (
        "same compiled to no forward/backward pair (a graph break or nothing to differentiate?): "
        "check it with compile_report()"
    )



def test_a_callable_without_a_name_is_named_by_what_it_is(x):
    detached = functools.partial(lambda t, k: t.detach().sum() * k, k=2)  # no __name__
    with pytest.raises(RuntimeError, match=re.escape(f"{detached} returned no tensor")):
        capture(detached, x)
    same = functools.partial(lambda t, k: t, k=2)
    with pytest.raises(RuntimeError, match=re.escape(f"{same} compiled to no forward/backward")):
        capture(same, torch.tensor(2.0, requires_grad=True))


def test_compile_report_keeps_a_reasons_first_line_and_what_dynamo_logged_or_warned():
    import torch._dynamo as dynamo

    def item(t):
        return t * t.sum().item()

    report = compile_report(item, torch.ones(2))
    torchs = str(dynamo.explain(item)(torch.ones(2)).break_reasons[0].reason)
    assert report["reasons"] == [torchs.strip().splitlines()[0]]  # 2.4.1: one line; 2.13: more

    def says_things(t):
        logging.getLogger("torch._dynamo").warning("from dynamo's logger")
        warnings.warn("a warning", stacklevel=1)
        return t * 2

    said = compile_report(says_things, torch.ones(2))["dynamo said"]
    assert said == ["from dynamo's logger", "a warning"]


def test_the_picture_in_chinese_names_a_simplified_chinese_face(x):
    from helpers import graph as graph_module
    from helpers.language import set_language

    graphs = capture(sin_cos, x)
    english = graph_picture(graphs.forward, "fw", graphs.saved).source
    set_language("zh")
    try:
        chinese = graph_picture(graphs.forward, "前向图", graphs.saved).source
    finally:
        set_language("en")
    assert f'fontname="{graph_module.CHINESE_NODE_FONT}"' in chinese
    assert f'fontname="{graph_module.CHINESE_TITLE_FONT}"' in chinese
    assert "CJK" not in english


def test_what_ran_and_what_was_saved_are_said_in_the_learners_language(x):
    from helpers.language import set_language

    graphs = capture(sin_cos, x)
    assert graphs.timeline() == "forward compiled → backward called → backward compiled"
    set_language("zh")
    try:
        timeline = graphs.timeline()
        text = graph_picture(graphs.forward, "前向图", graphs.saved).text()
    finally:
        set_language("en")
    assert timeline == "前向图编译完成 → 调用 backward() → 反向图编译完成"
    assert "  sin = sin(primals_1)  [为反向传播保存]" in text and "saved for" not in text
