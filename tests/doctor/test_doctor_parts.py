"""The doctor's three parts one by one: the recorder writes down what a step did, the verdicts
are computed from a record made by hand (no step, no watch), the report shows a conclusion made
by hand. tests/test_doctor.py runs the three together on every zoo case."""

from __future__ import annotations

import torch

from helpers.doctor import report
from helpers.doctor.record import (
    Backward,
    Cut,
    Location,
    ParameterRecord,
    Record,
    Recorder,
    Step,
    reach,
)
from helpers.doctor.verdicts import Conclusion, Finding, Judged, Verdict, conclude

CUT_AT = Location("/nowhere/train.py", 7, "main")
BACKWARD_AT = Location("/nowhere/train.py", 9, "main")
STEP_AT = Location("/nowhere/train.py", 10, "main")


# -- record -----------------------------------------------------------------------------------


def test_the_recorder_writes_down_the_cut_the_backward_and_the_step():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([0.5], requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=0.5)
    recorder = Recorder({"w": w, "b": b}, {})
    recorder.start()
    try:
        hidden = (w * 2).detach()  # the cut
        loss = (hidden * b).sum()
        loss.backward()
        optimizer.step()
    finally:
        record = recorder.stop(None, None, None)
    assert not torch.overrides._get_current_function_mode_stack()
    (cut,) = record.cuts
    assert cut.call == "detach" and cut.location.code == "hidden = (w * 2).detach()  # the cut"
    (backward,) = record.backwards
    assert backward.at.code == "loss.backward()" and not backward.no_graph
    (step,) = record.steps
    assert step.optimizer is optimizer and step.held == {id(w), id(b)} and not step.cleared
    assert step.location.code == "optimizer.step()"
    w_record, b_record = record.parameters[id(w)], record.parameters[id(b)]
    assert w_record.incoming is None and w_record.first_use.code == cut.location.code
    assert torch.equal(b_record.incoming, torch.tensor([6.0]))  # 2 * 1 + 2 * 2
    assert b_record.waiting == "stepped" and not b_record.leftover
    assert record.error is None and record.error_at is None
    recorder.forget()
    assert record.cuts == []


def test_reach_finds_the_leaves_a_graph_leads_back_to():
    w, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    cache: dict = {}
    total = w * 2 + b
    assert reach(total, cache) == {id(w), id(b)} and cache[total.grad_fn] == {id(w), id(b)}
    assert reach(total * 3, cache) == {id(w), id(b)}  # through the cached part
    cut = (w * 3).detach()
    assert reach(cut, cache) == {id(cut)} and reach(w, cache) == {id(w)}


# -- verdicts, from a record made by hand ------------------------------------------------------


def parameter(name: str, tensor: torch.Tensor, **fields) -> ParameterRecord:
    before = fields.pop("before", tensor.detach().clone())
    return ParameterRecord(name, tensor, before, trainable=tensor.requires_grad, **fields)


def test_verdicts_from_a_hand_made_record():
    w, b = torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)
    frozen = torch.ones(1)
    optimizer = torch.optim.SGD([w, b], lr=0.1)
    before = w.detach().clone()
    with torch.no_grad():
        w -= 0.25  # the step moved w
    record = Record(
        parameters={
            id(w): parameter("w", w, before=before, incoming=torch.ones(2)),
            id(b): parameter("b", b),
            id(frozen): parameter("frozen", frozen),
        },
        backwards=[Backward(at=BACKWARD_AT, through_cuts=frozenset({0}))],  # the loss's path
        cuts=[Cut("detach", CUT_AT, inputs=[b])],
        steps=[Step(optimizer, STEP_AT, held={id(w), id(b)}, cleared=set())],
    )
    conclusion = conclude(record)
    assert [
        (p.name, p.kind, p.optimizers, p.moved, p.verdict.cause) for p in conclusion.parameters
    ] == [
        ("w", "finite", ("SGD",), 0.25, "learned"),
        ("b", "None", ("SGD",), 0.0, "cut"),
        ("frozen", "None", (), 0.0, "frozen"),
    ]
    cut, note = conclusion.findings
    assert cut == Finding(
        "cut", ("b",), "no gradient: its path to the loss was cut by `.detach()`.", CUT_AT
    )
    assert cut.problem and note.cause == "frozen" and not note.problem
    assert conclusion.verdicts["b"] == Verdict("cut", cut.message, CUT_AT)


def test_parameters_with_the_same_verdict_make_one_finding():
    w, b = torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)
    parameters = {id(w): parameter("w", w), id(b): parameter("b", b)}
    (finding,) = conclude(Record(parameters=parameters)).findings
    assert finding.cause == "no_backward" and finding.parameters == ("w", "b")
    failed = Record(parameters=parameters, error=RuntimeError("boom\nmore"), error_at=CUT_AT)
    (finding,) = conclude(failed).findings
    assert finding.cause == "stopped" and finding.location == CUT_AT
    assert "(RuntimeError: boom)" in finding.message


# -- report, from a conclusion made by hand ----------------------------------------------------


def test_the_report_shows_a_hand_made_conclusion():
    finding = Finding("cut", ("b",), "its path was cut by `.detach()` & more.", CUT_AT)
    conclusion = Conclusion(
        [
            Judged("w", "finite", ("SGD", "Adam"), 0.25, Verdict("learned", "learned", None)),
            Judged("b", "None", (), 0.0, Verdict("cut", finding.message, CUT_AT)),
        ],
        [finding],
    )
    rows = report.table(conclusion)
    assert rows.column("gradient") == ["finite", "None"]
    assert rows.column("optimizer") == ["SGD, Adam", "none"]
    assert rows.column("verdict") == ["learned", "graph cut"]
    assert report.summary(2, []) == (
        "Every parameter got a gradient and moved (or is frozen): 2 checked."
    )
    assert report.summary(2, [finding]) == "1 finding(s) to fix:"
    assert report.as_text(rows, "S", [finding]) == (
        f"{rows!r}\n\nS\n- b: its path was cut by `.detach()` & more.\n    train.py:7"
    )
    assert report.as_html(rows, "S & T", [finding]) == (
        f"{rows._repr_html_()}<p>S &amp; T</p><ul><li>⚠️ <b>b</b>: its path was cut by "
        "<code>.detach()</code> &amp; more.<br><small>train.py:7</small> <code></code></li></ul>"
    )
    assert report.as_html(rows, "S", []) == f"{rows._repr_html_()}<p>S</p>"
    assert report.unfinished_html("ready") == "&lt;doctor checkup: ready&gt;"
