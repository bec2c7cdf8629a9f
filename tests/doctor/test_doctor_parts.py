"""The doctor's three parts one by one: the recorder writes down what a step did, the verdicts
are computed from a record made by hand (no step, no watch), the report shows a conclusion made
by hand. tests/test_doctor.py runs the three together on every zoo case."""

from __future__ import annotations

import math
from functools import partial

import pytest
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
from helpers.doctor.unregistered import Unregistered
from helpers.doctor.verdicts import Conclusion, Finding, Judged, Verdict, conclude

CUT_AT = Location("/nowhere/train.py", 7, "main")
BACKWARD_AT = Location("/nowhere/train.py", 9, "main")
STEP_AT = Location("/nowhere/train.py", 10, "main")
_TORCH_BACKWARD = torch.autograd.backward  # the recorder stands in for it only while it runs


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


def recorded(block, named: dict[str, torch.Tensor], modules=None, raises=()) -> Record:
    """What a Recorder writes down while `block()` runs (it may raise one of `raises`)."""
    recorder = Recorder(named, modules or {})
    recorder.start()
    error = None
    try:
        block()
    except raises as err:
        error = err
    finally:
        record = recorder.stop(None, error, None)
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


def test_gradients_handed_back_by_autograd_grad_do_not_arrive():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        torch.autograd.grad((w * 3).sum(), [w])  # returned, .grad untouched
        (w * 2).sum().backward()

    record = recorded(block, {"w": w})
    p = record.parameters[id(w)]
    assert torch.equal(p.incoming, torch.full((2,), 2.0)) and p.accumulated == 0
    (cut,) = record.cuts  # what it hands back has no graph: a cut, as any such call
    assert cut.call == "grad" and cut.location.code.startswith("torch.autograd.grad(")


def test_torch_autograd_backward_of_several_losses_is_followed_like_tensor_backward():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    w.grad = torch.ones(2)  # left over from before the block

    def block():
        torch.autograd.backward([(w * 2).sum(), (w * 3).sum()])

    record = recorded(block, {"w": w})
    p = record.parameters[id(w)]
    assert torch.equal(p.incoming, torch.full((2,), 5.0)) and p.leftover
    (backward,) = record.backwards  # one call, seen once on every release
    assert backward.at.code.startswith("torch.autograd.backward(") and not backward.no_graph


BACKWARD_CALLS = {  # each line calls backward from `loss` (w has no part in the loss)
    "one tensor": lambda loss, w: torch.autograd.backward(loss),
    "a list, no gradients": lambda loss, w: torch.autograd.backward([w.sum(), loss], None),
    "by keyword": lambda loss, w: torch.autograd.backward(
        tensors=(loss,), grad_tensors=[torch.ones(())]
    ),
    "the method": lambda loss, w: loss.backward(torch.ones(())),
}


@pytest.mark.parametrize("call", BACKWARD_CALLS.values(), ids=BACKWARD_CALLS.keys())
def test_every_way_to_call_backward_is_followed_through_its_cuts(call):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([0.5], requires_grad=True)

    def block():
        hidden = (w * 2).detach()  # the cut on the loss's path
        call((hidden * b).sum(), w)

    record = recorded(block, {"w": w, "b": b})
    (backward,) = record.backwards
    assert "backward(" in backward.at.code and backward.through_cuts == {0}
    assert not backward.no_graph
    assert torch.equal(record.parameters[id(b)].incoming, torch.tensor([6.0]))
    assert torch.autograd.backward is _TORCH_BACKWARD  # the recorder's stand-in is gone


def test_a_loss_made_before_the_block_hands_its_gradients_in():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * 3).sum()  # each block is a backward alone: no torch call comes before it
    for block in (loss.backward, lambda **kw: torch.autograd.backward(loss, **kw)):
        w.grad = None
        p = recorded(partial(block, retain_graph=True), {"w": w}).parameters[id(w)]
        assert torch.equal(p.incoming, torch.full((2,), 3.0)) and p.waiting == "block"


HANDOFFS = {  # each hands `a` (model 1's output) the gradient of b_in (model 2's input)
    "the method": lambda a, b_in: a.backward(b_in.grad),
    "the method, by keyword": lambda a, b_in: a.backward(gradient=b_in.grad),
    "the function": lambda a, b_in: torch.autograd.backward(a, b_in.grad),
    "the function, lists": lambda a, b_in: torch.autograd.backward([a], [b_in.grad]),
    "the function, by keyword": lambda a, b_in: torch.autograd.backward(
        tensors=a, grad_tensors=(b_in.grad,)
    ),
}


@pytest.mark.parametrize("hand_off", HANDOFFS.values(), ids=HANDOFFS.keys())
def test_the_wrong_hand_off_is_seen_however_the_gradient_is_passed(hand_off):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    v = torch.tensor([3.0, 5.0], requires_grad=True)

    def block():
        a, b = w * 2, v * 3  # two models' outputs
        a_in, b_in = a.detach().requires_grad_(), b.detach().requires_grad_()
        (a_in * b_in).sum().backward()
        hand_off(b, b_in)  # right: b gets b_in's gradient
        hand_off(a, b_in)  # wrong: a gets it too

    _, right, wrong = recorded(block, {"w": w, "v": v}).backwards
    assert right.wrong_handoff == frozenset() and wrong.wrong_handoff == {id(w)}


def test_a_gradient_that_is_not_a_tensor_meets_torchs_own_error():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        a_in = (w * 2).detach().requires_grad_()
        a_in.sum().backward()  # a hand-off leaf with a gradient: the doctor compares with it
        torch.autograd.backward(w * 3, [[1.0, 1.0]])  # a list, not a tensor

    record = recorded(block, {"w": w}, raises=TypeError)
    assert isinstance(record.error, TypeError)
    assert "gradient" in str(record.backwards[-1].error)  # torch's words, not the doctor's


def test_torch_autograd_backward_is_given_back_when_the_block_fails():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    not_a_scalar = w * 2  # torch refuses to start backward from it without a gradient
    record = recorded(lambda: torch.autograd.backward(not_a_scalar), {"w": w}, raises=RuntimeError)
    assert torch.autograd.backward is _TORCH_BACKWARD
    assert isinstance(record.backwards[0].error, RuntimeError)


def test_backward_of_roots_that_are_all_flagged_by_hand_has_no_graph():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        first, second = w.detach().sum(), w.detach().sum()
        first.requires_grad = True  # flagged here
        second.requires_grad = True
        torch.autograd.backward([first, second])
        torch.autograd.backward([first, (w * 2).sum()])  # one root has a graph

    all_flagged, one_real = recorded(block, {"w": w}).backwards
    assert all_flagged.no_graph
    assert all_flagged.flagged.code == "first.requires_grad = True  # flagged here"
    assert not one_real.no_graph


def test_the_first_infinite_gradient_is_found_behind_any_root():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        torch.autograd.backward([(w * 2).sum(), torch.sqrt(w - 1).sum()])  # the second: inf

    name, where = recorded(block, {"w": w}).first_nonfinite
    assert name == "SqrtBackward0" and where.code.startswith("torch.autograd.backward(")


@pytest.mark.skipif(
    torch.__version__ < "2.11", reason="torch shows torch.autograd.backward to modes from 2.11"
)
def test_a_backward_imported_before_the_block_is_followed_where_torch_shows_it():
    from torch.autograd import backward  # the function itself, not the recorder's stand-in

    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        backward([(w.detach() * 2).sum().requires_grad_()])

    (entry,) = recorded(block, {"w": w}).backwards
    assert entry.no_graph and entry.at.code.startswith("backward([")


# torch warns of the cycle a gradient with a graph makes with its parameter: wanted here
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_the_doctors_own_work_on_gradients_with_a_graph_is_not_recorded():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)

    def block():
        (w**3).sum().backward(create_graph=True)  # gradients that require grad themselves
        optimizer.step()

    record = recorded(block, {"w": w})
    assert record.cuts == [] and record.parameters[id(w)].incoming.requires_grad is False


def test_a_tensor_a_call_hands_back_unchanged_keeps_the_line_that_made_it():
    w = torch.tensor([1.0, 0.0], requires_grad=True)

    def block():
        root = torch.sqrt(w)  # made here: infinite gradient at 0
        root.contiguous().sum().backward()  # the same tensor, handed back

    name, where = recorded(block, {"w": w}).first_nonfinite
    assert name == "SqrtBackward0" and where.code.startswith("root = torch.sqrt(w)")


def test_a_tensor_made_from_nothing_does_not_come_from_a_python_value():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        print((w * 2).sum().item())  # a log line: a Python-value cut
        ((w * 3).sum() * torch.ones(1)).sum().backward()  # ones() is not made from that value

    (backward,) = recorded(block, {"w": w}).backwards
    assert backward.through_cuts == frozenset()


def test_code_run_with_globals_of_its_own_is_the_learners():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    code = compile("y = (w * 2).detach()", "/nowhere/script.py", "exec")
    (cut,) = recorded(lambda: exec(code, {"w": w}), {"w": w}).cuts  # no __name__ in them
    assert cut.location == Location("/nowhere/script.py", 1, "<module>")


def test_the_modules_whose_forward_ran_are_written_down():
    used, unused = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    record = recorded(lambda: used(torch.ones(2)), {}, {"used": used, "unused": unused})
    assert record.called == {"used"}


def test_grad_off_is_where_grad_was_switched_off_not_where_false_was_passed():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        with torch.no_grad():
            torch.tensor(False)  # a call whose first argument is False
            return w * 2

    (cut,) = [c for c in recorded(block, {"w": w}).cuts if c.inputs]
    assert cut.grad_off_at.code == "with torch.no_grad():"


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


def cut_by(cut: Cut, **fields) -> Verdict:
    """The verdict of b, whose values reach the loss only through `cut`."""
    b = torch.ones(1, requires_grad=True)
    cut.inputs = [b]
    fields.setdefault("backwards", [Backward(at=BACKWARD_AT, through_cuts=frozenset({0}))])
    record = Record(parameters={id(b): parameter("b", b)}, cuts=[cut], **fields)
    return conclude(record).verdicts["b"]


def how(cut: Cut) -> str:
    message = cut_by(cut).message
    return message.removeprefix("no gradient: its path to the loss was cut by ").removesuffix(".")


def test_each_kind_of_cut_is_named_in_words():
    assert how(Cut("mul", CUT_AT, [], inference=True)) == ("`mul()` under `torch.inference_mode()`")
    assert how(Cut("mul", CUT_AT, [], grad_off_at=STEP_AT)) == (
        "`mul()` under `torch.no_grad()` (entered at train.py:10)"
    )
    assert how(Cut("item", CUT_AT, [])) == "`.item()`, which leaves torch for a Python value"
    assert how(Cut("to", CUT_AT, [], dtype=torch.int64)) == (
        "`to()` to int64: integers carry no gradient"
    )
    for dtype in (None, torch.float32, torch.complex64):  # not integers: another kind of cut
        assert how(Cut("sum", CUT_AT, [], dtype=dtype)) == (
            "`sum()`, whose result does not require grad"
        )


def test_a_cut_no_loss_came_through_is_passed_over_for_the_next():
    b = torch.ones(1, requires_grad=True)
    record = Record(
        parameters={id(b): parameter("b", b)},
        backwards=[Backward(at=BACKWARD_AT, through_cuts=frozenset({1}))],
        cuts=[Cut("item", STEP_AT, inputs=[b]), Cut("detach", CUT_AT, inputs=[b])],
    )  # the first is a log line's .item(); the second is on the loss's path
    assert conclude(record).verdicts["b"].location == CUT_AT


def test_a_hand_off_leaf_needs_the_cuts_shape_and_values():
    other_values = [torch.full((1,), 2.0, requires_grad=True)]
    assert cut_by(Cut("detach", CUT_AT, []), handoff_leaves=other_values).cause == "cut"
    same_values = [torch.ones(1, requires_grad=True)]
    verdict = cut_by(Cut("detach", CUT_AT, []), handoff_leaves=same_values)
    assert verdict.cause == "handoff_not_called" and verdict.location == CUT_AT


def test_a_loss_flagged_by_hand_names_the_real_cut_only_when_there_is_one():
    b = torch.ones(1, requires_grad=True)
    flagged = [Backward(BACKWARD_AT, no_graph=True, flagged=STEP_AT, through_cuts=frozenset({0}))]
    record = Record(parameters={id(b): parameter("b", b)}, backwards=flagged)
    verdict = conclude(record).verdicts["b"]
    assert verdict.location == STEP_AT and verdict.message.endswith("stopped at the loss.")
    with_cut = cut_by(Cut("detach", CUT_AT, []), backwards=flagged)
    assert with_cut.message.endswith("stopped at the loss. The real cut: `.detach()`.")


def test_an_error_without_words_is_named_by_its_type():
    b = torch.ones(1, requires_grad=True)
    record = Record(parameters={id(b): parameter("b", b)}, error=KeyError(), error_at=CUT_AT)
    assert "(KeyError)" in conclude(record).verdicts["b"].message


def test_a_module_never_called_is_named_in_full_and_only_when_it_was_not_called():
    w = torch.ones(1, requires_grad=True)
    parameters = {id(w): parameter("encoder.layer.weight", w)}
    modules = {"encoder": torch.nn.Identity(), "encoder.layer": torch.nn.Identity()}
    record = Record(parameters=parameters, modules=modules, backwards=[Backward(BACKWARD_AT)])
    assert (
        "its module `encoder.layer` was built"
        in conclude(record).verdicts["encoder.layer.weight"].message
    )
    record.called = {"encoder", "encoder.layer"}
    assert conclude(record).verdicts["encoder.layer.weight"].cause == "unused"


def stepped(gradient: torch.Tensor, before: torch.Tensor | None = None, **fields) -> Record:
    """A record of w getting `gradient` and one SGD step (lr 0.1) holding it."""
    w = torch.ones(gradient.shape, requires_grad=True)
    optimizer = fields.pop("optimizer", torch.optim.SGD([w], lr=0.1))
    if before is None:
        before = w.detach().clone()
    return Record(
        parameters={id(w): parameter("w", w, before=before, incoming=gradient)},
        backwards=[Backward(BACKWARD_AT)],
        steps=[Step(optimizer, STEP_AT, held={id(w)}, cleared=set())],
        **fields,
    )


def test_an_infinite_and_a_nan_gradient_are_told_apart():
    (inf,) = conclude(stepped(torch.tensor([math.inf]))).parameters
    assert inf.kind == "inf" and inf.verdict == Verdict(
        "nonfinite",
        "its gradient holds inf. The first backward function that turned finite gradients into a "
        "NaN or an infinity: ?, made by this line of the forward pass.",  # ?: no node was seen
        None,
    )
    (nan,) = conclude(stepped(torch.tensor([math.nan, math.inf]))).parameters
    assert nan.kind == "NaN"


def test_an_empty_parameter_moved_by_nothing():
    (empty,) = conclude(stepped(torch.ones(0))).parameters
    assert empty.moved == 0.0


def test_a_parameter_the_step_did_not_move_blames_its_own_learning_rate_or_rounding():
    w = torch.ones(1, requires_grad=True)
    other = torch.ones(1, requires_grad=True)
    frozen_lr = torch.optim.SGD([{"params": [w], "lr": 0.0}, {"params": [other], "lr": 0.1}])
    record = stepped(torch.ones(1), optimizer=frozen_lr)
    record.parameters = {id(w): parameter("w", w, incoming=torch.ones(1))}
    record.steps[0].held = {id(w), id(other)}
    (judged,) = conclude(record).parameters
    assert judged.verdict == Verdict(
        "not_moved",
        "it got a nonzero gradient and the optimizer holds it, but the step did not move it: "
        "its learning rate is 0.0.",
        STEP_AT,
    )
    (tiny,) = conclude(stepped(torch.tensor([3e-9]))).parameters
    assert tiny.verdict.location == STEP_AT
    assert tiny.verdict.message.startswith(
        "its gradient is so small (largest entry 3.0e-09) that the step is lost in rounding: "
        "float32 keeps"
    )


def test_a_gradient_the_optimizer_does_not_hold_points_at_its_step():
    record = stepped(torch.ones(1))
    other = torch.ones(1, requires_grad=True)
    record.parameters[id(other)] = parameter("other", other, incoming=torch.ones(1))
    verdict = conclude(record).verdicts["other"]
    assert verdict.cause == "not_in_optimizer" and verdict.location == STEP_AT


def test_an_unregistered_tensor_is_judged_once_the_step_used_it_or_it_got_a_gradient():
    t = torch.ones(1, requires_grad=True)
    held = Unregistered("scale", t, "tensor", "self.scale", "nn.Parameter", CUT_AT)
    for used in ({"first_use": CUT_AT}, {"incoming": torch.ones(1)}, {}):
        record = Record(parameters={id(t): parameter("scale", t, unregistered=held, **used)})
        judged = [p.name for p in conclude(record).parameters]
        assert judged == (["scale"] if used else [])


def test_a_finding_without_a_line_is_its_parameters_and_message():
    assert str(Finding("unused", ("w", "b"), "never used.")) == "w, b: never used."


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
    assert rows.title == "One training step, parameter by parameter"
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
    note = Finding("frozen", ("c",), "frozen.")  # a note, with no line
    assert report.as_html(rows, "S", [finding, note]).endswith(
        "<code></code></li><li>ℹ️ <b>c</b>: frozen.</li></ul>"
    )
    assert report.unfinished_html("ready") == "&lt;doctor checkup: ready&gt;"


# -- NaN and inf where they were made; values the step made infinite; gradients handed back -----


def test_the_recorder_writes_down_the_calls_that_made_a_nan_or_an_inf_from_finite_values():
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    big = torch.full((4,), 3e38)  # finite entries whose sum overflows: nothing made here

    def block():
        (big * 1).sum()  # inf from finite values, with no graph
        logged = w.log()  # NaN from finite values: the first on a graph
        (logged * 2).exp().sum().backward()  # NaN in, NaN out: not made here

    record = recorded(block, {"w": w})
    sums, log = record.made_nonfinite
    assert (sums.call, sums.kind, sums.node) == ("sum", "inf", None)
    assert (log.call, log.kind, log.node.name()) == ("log", "NaN", "LogBackward0")
    assert log.location.code == "logged = w.log()  # NaN from finite values: the first on a graph"
    (backward,) = record.backwards
    assert backward.root_kind == "NaN" and log.node in backward.root_graph
    finite = recorded(lambda: (w * big[:2]).sum().backward(), {"w": w})
    assert finite.made_nonfinite == [] and finite.backwards[0].root_kind == ""
    assert finite.backwards[0].root_graph == frozenset()


def test_the_recorder_keeps_the_first_few_calls_that_made_a_nan():
    w = torch.tensor([-1.0], requires_grad=True)

    def block():
        for _ in range(20):
            w.log()

    assert len(recorded(block, {"w": w}).made_nonfinite) == 8


def test_gradients_handed_back_by_autograd_grad_are_written_down_apart():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def block():
        torch.autograd.grad((w * 3).sum(), [w])
        torch.autograd.grad((w * 2).sum(), [w])

    p = recorded(block, {"w": w}).parameters[id(w)]
    assert p.incoming is None and torch.equal(p.returned, torch.full((2,), 5.0))
    assert p.returned_at.code == "torch.autograd.grad((w * 3).sum(), [w])"


def broken_loss(made, kind: str = "NaN") -> Record:
    """A record of w's NaN gradient after a backward from a loss that was already `kind`."""
    record = stepped(torch.tensor([math.nan]))
    node = made[0].node if made and made[0].node is not None else "graph"
    record.backwards = [Backward(BACKWARD_AT, root_kind=kind, root_graph=frozenset({node}))]
    record.made_nonfinite = made
    return record


def test_a_nan_the_forward_pass_made_is_named_where_it_was_made():
    from helpers.doctor.record import Made

    on_graph = torch.ones(1, requires_grad=True).log().grad_fn
    made = [Made("log", CUT_AT, "inf", on_graph)]
    (judged,) = conclude(broken_loss(made, "inf")).parameters
    assert judged.verdict == Verdict(
        "nonfinite",
        "its gradient holds NaN because the loss itself was already inf: the forward pass made "
        "it, not the backward. The first call on the loss's graph that turned finite values into "
        "inf: `log()`, at this line.",
        CUT_AT,
    )
    elsewhere = [Made("div", STEP_AT, "NaN", None), made[0]]
    record = broken_loss(elsewhere)
    record.backwards[0].root_graph = frozenset({on_graph})
    assert conclude(record).parameters[0].verdict.location == CUT_AT  # the one on the graph
    off_graph = [Made("div", STEP_AT, "NaN", None)]
    verdict = conclude(broken_loss(off_graph)).parameters[0].verdict
    assert verdict.location == STEP_AT and "did not find it on the loss's graph" in verdict.message
    verdict = conclude(broken_loss([])).parameters[0].verdict
    assert verdict.location == BACKWARD_AT
    assert "no call of the step that the doctor saw turned finite values into one" in (
        verdict.message
    )


def test_values_the_step_made_infinite_or_found_so():
    record = stepped(torch.ones(1))
    (w,) = [p.tensor for p in record.parameters.values()]
    with torch.no_grad():
        w.fill_(math.inf)
    (judged,) = conclude(record).parameters
    assert judged.verdict.cause == "diverged" and judged.verdict.location == STEP_AT
    assert "its values hold inf: the update was too large for float32" in judged.verdict.message
    record = stepped(torch.ones(1), before=torch.tensor([math.nan]))
    (w,) = [p.tensor for p in record.parameters.values()]
    with torch.no_grad():
        w.fill_(math.nan)
    (judged,) = conclude(record).parameters
    assert judged.verdict == Verdict(
        "diverged",
        "its values already held NaN before the block: an earlier step made them so. Run the "
        "doctor on earlier steps to find the update that did it.",
        None,
    )


def test_a_gradient_handed_back_is_judged_as_one_that_arrived():
    w = torch.ones(1, requires_grad=True)
    handed = parameter("w", w, returned=torch.ones(1), returned_at=CUT_AT)
    verdict = conclude(Record(parameters={id(w): handed})).verdicts["w"]
    assert verdict.cause == "grad_returned" and verdict.location == CUT_AT
    nan = parameter("w", w, returned=torch.tensor([math.nan]))
    assert conclude(Record(parameters={id(w): nan})).verdicts["w"].cause == "nonfinite"
    with torch.no_grad():
        w.fill_(math.inf)
    assert conclude(Record(parameters={id(w): handed})).verdicts["w"].cause == "diverged"
