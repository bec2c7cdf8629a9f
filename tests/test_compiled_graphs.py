"""helpers.compiled_graphs: the graphs torch.compile traces, what they keep, and graph breaks."""

from __future__ import annotations

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


def test_compile_report_counts_torchs_graph_break_and_keeps_dynamo_quiet(capfd):
    def reads(x):
        return x * x.sum().item()

    report = compile_report(reads, torch.ones(3))
    assert report["graphs"] == 2 and report["graph breaks"] == 1
    assert "item" in report["reasons"][0] and report["dynamo said"]
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
