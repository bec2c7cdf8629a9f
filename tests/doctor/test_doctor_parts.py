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


def test_reach_keeps_what_it_found_on_either_side_of_a_cached_part():
    w, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    cache: dict = {}
    part = w * 2
    assert reach(part, cache) == {id(w)}
    assert reach(part + b, cache) == {id(w), id(b)}  # b's leaf is met before the cached part
    assert reach(b + part, cache) == {id(w), id(b)}  # the cached part is met first


def recorded(block, named: dict[str, torch.Tensor]) -> Record:
    """What a Recorder writes down while `block()` runs."""
    recorder = Recorder(named, {})
    recorder.start()
    try:
        block()
    finally:
        record = recorder.stop(None, None, None)
    return record


def test_gradients_that_arrive_twice_in_the_block_add_up_and_are_counted():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        for factor in (3, 2, 1):  # three backward() calls, no zero_grad() between them
            (w * factor).sum().backward()

    p = recorded(block, {"w": w}).parameters[id(w)]
    assert torch.equal(p.incoming, torch.tensor([6.0, 6.0])) and p.accumulated == 2
    assert p.waiting == "block" and not p.leftover


def test_only_a_cleared_gradient_that_no_step_used_is_written_down():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)

    def block():
        (w * 3).sum().backward()
        w.grad = torch.ones(2)  # a gradient handed in: not a clear
        torch.zeros(3).zero_()  # zeroing a tensor that is no gradient
        optimizer.step()
        optimizer.zero_grad()  # after the step: the gradient was used, not lost

    assert recorded(block, {"w": w}).parameters[id(w)].cleared_at is None


def test_a_clear_is_written_down_once_at_the_learners_own_line():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def forget():
        w.grad = None  # the first clear

    def block():
        (w * 3).sum().backward()
        forget()
        (w * 2).sum().backward()
        w.grad.zero_()  # a second clear, later

    cleared = recorded(block, {"w": w}).parameters[id(w)].cleared_at
    assert (cleared.code, cleared.function) == ("w.grad = None  # the first clear", "forget")


def test_the_watch_goes_on_after_a_backward_and_after_a_step():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)

    other = torch.ones(2, requires_grad=True)  # a leaf the doctor does not watch

    def block():
        (other * 3).sum().backward()  # only the doctor's own hooks run in it
        first = (w * 2).detach()  # a cut after that backward
        (w * 3).sum().backward()
        optimizer.step()
        second = (w * 4).detach()  # a cut after the step
        return first, second

    record = recorded(block, {"w": w})
    assert [c.location.code for c in record.cuts] == [
        "first = (w * 2).detach()  # a cut after that backward",
        "second = (w * 4).detach()  # a cut after the step",
    ]


def test_what_the_step_itself_does_is_not_the_learners_use():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    w.grad = torch.ones(2)  # from before the block
    optimizer = torch.optim.SGD([w], lr=0.1)
    p = recorded(optimizer.step, {"w": w}).parameters[id(w)]
    assert p.first_use is None and p.waiting == "stepped"


def test_a_backward_from_a_leaf_and_from_a_tensor_flagged_at_birth():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    free = torch.tensor(2.0, requires_grad=True)  # not a parameter, made requiring grad

    def block():
        w.backward(torch.ones(2))  # from a parameter itself: it has no graph, and needs none
        free.backward()

    own, flagged_at_birth = recorded(block, {"w": w}).backwards
    assert not own.no_graph and own.flagged is None
    assert flagged_at_birth.no_graph and flagged_at_birth.flagged == flagged_at_birth.at
    assert flagged_at_birth.at.code == "free.backward()"


def test_the_first_infinite_gradient_is_found_past_a_constant_and_past_a_leaf():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    s = torch.tensor(1.0, requires_grad=True)

    def past_a_constant():
        (torch.sqrt(w - 1).sum() + torch.ones(())).backward()  # sqrt's gradient at 0: infinite

    def past_a_leaf():
        (torch.sqrt(w - 1).sum() + s).backward()  # the leaf's branch is looked at first

    for block in (past_a_constant, past_a_leaf):
        record = recorded(block, {"w": w, "s": s})
        name, where = record.first_nonfinite
        assert name == "SqrtBackward0" and where.code.startswith("(torch.sqrt(w - 1).sum() +")


def test_a_local_called_func_is_no_decorated_function():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        func = print  # a local that only shares the name torch's decorator wrapper uses
        with torch.no_grad():
            return func, w * 2

    (cut,) = recorded(block, {"w": w}).cuts
    assert cut.grad_off_at.code == "with torch.no_grad():" and cut.decorated is None


def test_the_error_a_block_raised_is_placed_at_the_innermost_line_of_the_learners_code():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    recorder = Recorder({"w": w}, {})

    def inner():
        return w @ torch.ones(3)  # two elements against three

    recorder.start()
    try:
        inner()
    except RuntimeError as err:
        raised = err
        record = recorder.stop(type(err), err, err.__traceback__)
    assert record.error is raised
    where = record.error_at
    assert where.function == "inner"
    assert where.code == "return w @ torch.ones(3)  # two elements against three"


def test_a_cut_says_whether_it_was_made_in_inference_mode_or_with_grad_off_from_the_start():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        with torch.inference_mode():
            return w * 2

    (cut,) = recorded(block, {"w": w}).cuts
    assert cut.inference is True and cut.dtype == torch.float32
    with torch.no_grad():  # switched off before the watch began: no line to point at
        (cut,) = recorded(lambda: w * 2, {"w": w}).cuts
    assert cut.grad_off_at is None and cut.inference is False


def test_python_numbers_from_two_cuts_that_come_back_as_a_tensor_carry_both():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        first = (w * 2).sum().item()
        second = (w * 3).sum().item()
        back = torch.tensor([first, second])
        (back * w).sum().backward()

    record = recorded(block, {"w": w})
    assert [c.call for c in record.cuts] == ["item", "item"]
    assert record.backwards[0].through_cuts == {0, 1}


def test_a_cuts_result_passed_by_keyword_carries_the_cut():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        cut = (w * 2).detach()
        (torch.add(w, other=cut) * 1).sum().backward()

    assert recorded(block, {"w": w}).backwards[0].through_cuts == {0}


def test_only_a_tensor_switched_on_by_hand_is_a_hand_off_leaf():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    off = torch.ones(2, requires_grad=True)
    on = torch.ones(2)

    def block():
        off.requires_grad = False  # switched off: no hand-off
        torch.ones(2).requires_grad_(False)
        w.requires_grad_()  # a parameter: no hand-off either
        on.requires_grad = True

    leaves = recorded(block, {"w": w}).handoff_leaves
    assert len(leaves) == 1 and leaves[0] is on


def test_a_parameter_without_a_gradient_waits_for_nothing():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    zeros = torch.tensor([1.0], requires_grad=True)
    zeros.grad = torch.zeros(1)  # a gradient of zeros: nothing waits to be used
    p = recorded(lambda: None, {"w": w, "zeros": zeros}).parameters
    assert p[id(w)].waiting == "" and p[id(zeros)].waiting == ""


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
