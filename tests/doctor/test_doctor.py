"""The gradient doctor: every case of 08's no-learning zoo and 06's split-learning bug zoo,
written as a learner writes them, gets its cause and its line; correct steps get a clean bill."""

from __future__ import annotations

import re
import warnings
from typing import ClassVar

import pytest
import torch
from torch import nn

from helpers import split
from helpers.doctor import CAUSES, Checkup, Location, doctor
from helpers.split import build_models, cut, make_optimizers, post_tensors

LR = 0.0625
x = torch.tensor([[1.0, 2.0], [2.0, -1.0]])
target = torch.tensor([[1.0], [2.5]])
loss_fn = nn.MSELoss()
ALL = ["first.weight", "first.bias", "middle.weight", "middle.bias", "last.weight", "last.bias"]


class ThreeLayers(nn.Module):
    """08's model: first -> middle -> last, no course helper in it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first, self.middle, self.last = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 1)

    def forward(self, x):
        return self.last(self.middle(self.first(x)))


def causes(checkup) -> dict[str, str]:
    return {name: checkup.cause(name) for name in ALL}


def code(checkup, name: str) -> str:
    where = checkup.where(name)
    assert where is not None, f"no line for {name}: {checkup}"
    return where.code


# -- 08's zoo ---------------------------------------------------------------------------------


def test_a_correct_step_gets_a_clean_bill():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.3f}")  # logging leaves the graph: not a finding
    assert checkup.healthy and checkup.findings == [], checkup
    assert set(causes(checkup).values()) == {"learned"}
    assert checkup.rows.column("gradient") == ["finite"] * 6
    assert checkup.rows.column("optimizer") == ["SGD"] * 6
    assert all(moved > 0 for moved in checkup.rows.column("max |Δ|"))
    assert "Every parameter got a gradient and moved" in repr(checkup)


def flag_by_setting(loss):
    loss.requires_grad = True  # the popular "fix"


def flag_by_method(loss):
    loss.requires_grad_()  # the same "fix", as a method


@pytest.mark.parametrize("flag", [flag_by_setting, flag_by_method])
def test_the_loss_flag_set_by_hand_and_the_real_cut(flag):
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        with torch.no_grad():  # copied from the evaluation loop
            loss = loss_fn(model(x), target)
        flag(loss)
        loss.backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"loss_flag"}
    assert checkup.where("first.weight").function == flag.__name__
    (finding,) = checkup.findings
    assert finding.parameters == tuple(ALL)
    assert "The real cut: `linear()` under `torch.no_grad()` (entered at test_doctor.py:" in (
        finding.message
    )
    assert checkup.rows.column("gradient") == ["None"] * 6
    assert checkup.rows.column("max |Δ|") == [0.0] * 6


def test_no_grad_without_the_flag_fails_and_the_error_names_the_cut():
    model = ThreeLayers()
    with pytest.raises(RuntimeError, match="does not require grad") as caught:
        with doctor(model) as checkup:
            with torch.no_grad():
                loss = loss_fn(model(x), target)
            loss.backward()
    assert set(causes(checkup).values()) == {"cut"}
    assert code(checkup, "last.bias") == "with torch.no_grad():"
    (note,) = caught.value.__notes__
    assert note.startswith("doctor: first.weight, ") and "under `torch.no_grad()`" in note


def test_a_no_grad_decorator_is_named():
    model = ThreeLayers()

    @torch.no_grad()
    def features(x):
        return model.first(x)

    with doctor(model) as checkup:
        loss_fn(model.last(model.middle(features(x))), target).backward()
    assert checkup.cause("first.weight") == "cut" and checkup.cause("middle.weight") == "no_step"
    assert "a call of features(), decorated with a grad mode" in checkup.problems[0].message


def test_an_optimizer_over_another_model():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model = ThreeLayers()  # the model cell, run again to start fresh
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"other_model"}
    # the line that built the optimizer ran before the block: no line named, not step()'s
    assert checkup.where("first.bias") is None
    assert "(SGD, holding 6 tensors) holds none of this model's" in checkup.findings[0].message
    assert checkup.rows.column("optimizer") == ["none"] * 6


def test_a_parameter_left_out_of_the_optimizer():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.last.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert causes(checkup) == dict.fromkeys(ALL[:4], "not_in_optimizer") | dict.fromkeys(
        ALL[4:], "learned"
    )


def test_no_step_at_all():
    model = ThreeLayers()
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
    assert set(causes(checkup).values()) == {"no_step"}


def test_a_step_by_hand_learns():
    """SGD written out under no_grad() is a step: no false "no step()" (10b's question)."""
    model = ThreeLayers()
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= LR * p.grad
    assert set(causes(checkup).values()) == {"learned"} and checkup.healthy


def test_a_step_by_hand_that_skips_a_layer():
    model = ThreeLayers()
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        with torch.no_grad():
            for p in model.last.parameters():
                p -= LR * p.grad
    assert causes(checkup) == dict.fromkeys(ALL[:4], "no_step") | dict.fromkeys(ALL[4:], "learned")


def test_no_backward_at_all():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target)
        optimizer.step()
    assert set(causes(checkup).values()) == {"no_backward"}


def forward_data(model, x):
    return model.last(model.middle(model.first(x).data))


def forward_detach(model, x):
    return model.last(model.middle(model.first(x).detach()))


def forward_tensor(model, x):
    h = torch.tensor(model.first(x))  # "make sure it is a tensor"
    return model.last(model.middle(h))


def forward_integer(model, x):
    h = model.first(x).round().long()  # "whole numbers only"
    return model.last(model.middle(h.float()))


@pytest.mark.parametrize(
    ("forward", "line", "how"),
    [
        (forward_data, "return model.last(model.middle(model.first(x).data))", "`.data`"),
        (forward_detach, "return model.last(model.middle(model.first(x).detach()))", "`.detach()`"),
        (
            forward_tensor,
            'h = torch.tensor(model.first(x))  # "make sure it is a tensor"',
            "`torch.tensor(...)` of a tensor",
        ),
        (
            forward_integer,
            'h = model.first(x).round().long()  # "whole numbers only"',
            "`long()` to int64",
        ),
    ],
)
def test_each_cut_is_named_with_its_line(forward, line, how):
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.tensor(t) warns
        loss_fn(forward(model, x), target).backward()
        optimizer.step()
    assert causes(checkup)["first.weight"] == causes(checkup)["first.bias"] == "cut"
    assert causes(checkup)["last.weight"] == "learned"
    assert code(checkup, "first.weight") == line
    assert checkup.where("first.weight").function == forward.__name__
    assert f"its path to the loss was cut by {how}" in checkup.problems[0].message


def test_a_cut_is_named_when_the_loss_goes_to_torch_autograd_backward():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        torch.autograd.backward(loss_fn(forward_detach(model, x), target))
        optimizer.step()
    assert causes(checkup)["first.weight"] == "cut" and causes(checkup)["last.bias"] == "learned"
    assert code(checkup, "first.weight") == (
        "return model.last(model.middle(model.first(x).detach()))"
    )


def test_a_frozen_layer_is_said_not_blamed():
    model = ThreeLayers()
    model.middle.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert checkup.cause("middle.weight") == "frozen" and checkup.cause("first.weight") == "learned"
    assert checkup.healthy and not CAUSES["frozen"]
    assert [f.cause for f in checkup.findings] == ["frozen"]


def test_a_layer_frozen_inside_the_step_is_frozen_too():
    model = ThreeLayers()
    with doctor(model) as checkup:
        model.middle.requires_grad_(False)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert causes(checkup) == dict.fromkeys(ALL, "learned") | {
        "middle.weight": "frozen",
        "middle.bias": "frozen",
    }


def test_the_exercise_train_loop_with_two_bugs():
    """08's exercise 2, as it is handed out: another model's optimizer and a detach."""
    model = ThreeLayers()
    with doctor(model) as checkup:
        optimizer = torch.optim.SGD(ThreeLayers().parameters(), lr=LR)
        for _ in range(3):
            optimizer.zero_grad()
            h = model.first(x).detach()
            loss = loss_fn(model.last(model.middle(h)), target)
            loss.backward()
            optimizer.step()
    assert causes(checkup)["first.weight"] == "cut" and code(checkup, "first.weight") == (
        "h = model.first(x).detach()"
    )
    assert causes(checkup)["last.bias"] == "other_model"


def test_stale_gradients_from_the_last_step():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        for _ in range(2):
            loss = loss_fn(model(x), target)
            loss.backward()  # no zero_grad() anywhere
            optimizer.step()
    assert set(causes(checkup).values()) == {"leftover"}
    assert code(checkup, "middle.bias") == "loss.backward()  # no zero_grad() anywhere"


def test_stale_gradients_from_before_the_block():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn(model(x), target).backward()
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"leftover"}


def test_accumulation_on_purpose_is_a_note():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        for half in (slice(0, 1), slice(1, 2)):
            loss_fn(model(x[half]), target[half]).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"accumulated"} and checkup.healthy
    assert "the sum of 2 backward() calls" in checkup.findings[0].message


def test_zero_grad_between_backward_and_step():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.zero_grad()
        optimizer.step()
    assert set(causes(checkup).values()) == {"cleared_before_step"}
    assert code(checkup, "last.bias") == "optimizer.zero_grad()"  # seen clearing: its line
    assert checkup.rows.column("gradient") == ["finite"] * 6  # what backward computed


def test_a_gradient_cleared_by_hand_names_that_line():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        model.first.weight.grad = None
        optimizer.step()
    assert checkup.cause("first.weight") == "cleared_before_step"
    assert code(checkup, "first.weight") == "model.first.weight.grad = None"


def test_a_gradient_gone_by_a_way_the_doctor_did_not_see_blames_no_zero_grad():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        with torch.no_grad():
            model.first.weight.grad.mul_(0)  # not zero_grad(), not zero_()
        optimizer.step()
    assert checkup.cause("first.weight") == "cleared_before_step"
    message = next(f.message for f in checkup.findings if "first.weight" in f.parameters)
    assert "no zero_grad() ran between them" in message
    assert code(checkup, "first.weight") == "optimizer.step()"


def test_a_learning_rate_of_zero():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"not_moved"}
    assert "its learning rate is 0.0." in checkup.findings[0].message


def test_a_bias_before_batch_norm_moves_by_rounding_noise_only():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert checkup.cause("0.bias") == "rounded_away" and checkup.cause("0.weight") == "learned"
    assert "float32 keeps only so many digits" in checkup.problems[0].message


def test_a_zero_gradient():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        (loss_fn(model(x), target) + 0 * model.first.weight.sum()).backward()
        with torch.no_grad():
            model.first.weight.grad.zero_()
        optimizer.step()
    assert checkup.cause("first.weight") == "cleared_before_step"  # zeroed by hand, then step()
    assert code(checkup, "first.weight") == "model.first.weight.grad.zero_()"
    assert checkup.cause("first.bias") == "learned"
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # the ReLU is off for every input
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert checkup.cause("0.weight") == "zero_gradient" and checkup.cause("2.bias") == "learned"


def test_a_nan_gradient_names_the_first_backward_function_and_its_line():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        out = model(x)
        loss = (out - out.detach()).sqrt().sum()  # sqrt at 0: an infinite slope
        loss.backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"nonfinite"}
    assert code(checkup, "first.weight") == (
        "loss = (out - out.detach()).sqrt().sum()  # sqrt at 0: an infinite slope"
    )
    assert ": SqrtBackward0, made by this line" in checkup.findings[0].message
    assert checkup.rows.column("gradient")[0] in ("NaN", "inf")


class WithExtras(nn.Module):
    """A learner's own module: one layer built and never called, a parameter used and dropped."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 1)
        self.head = nn.Linear(1, 1)  # built, never called
        self.scale = nn.Parameter(torch.ones(1))
        self.unused = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        aux = self.scale * 2  # computed, then dropped  # noqa: F841
        return self.body(x)


def test_unused_parameters_and_modules():
    model = WithExtras()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert checkup.cause("body.weight") == "learned"
    assert checkup.cause("head.weight") == checkup.cause("head.bias") == "module_not_called"
    assert checkup.cause("unused") == "unused" and checkup.where("unused") is None
    assert checkup.cause("scale") == "not_reaching_loss"
    assert checkup.where("scale").code.startswith("aux = self.scale * 2  # computed, then dropped")
    assert "its module `head` was built but never called" in str(checkup)
    assert checkup.rows.column("optimizer") == ["Adam"] * 6


# -- 06's split-learning zoo --------------------------------------------------------------------

tokens, label = post_tensors()


def split_checkup(step) -> tuple:
    m = build_models(seed=42)
    with doctor(m.named_parameters()) as checkup:
        step(m)
    return m, checkup


def by_model(checkup, m) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name in m.named_parameters():
        found.setdefault(name.split(".")[0], set()).add(checkup.cause(name))
    return found


def model1_handed_the_wrong_gradient(step):
    """The checkup of a split step whose bug is ff2's gradient handed to model 1: model 1 is told
    so, and models 2 and 3 learned."""
    m, checkup = split_checkup(step)
    found = by_model(checkup, m)
    assert found == {"model1": {"wrong_handoff"}, "model2": {"learned"}, "model3": {"learned"}}
    return checkup


def forward_through_cuts(m):
    """06's forward: model 1, a cut, model 2, a cut, model 3 and its loss."""
    f1 = m.model1(tokens)
    ff1 = cut(f1)
    f2 = m.model2(ff1)
    ff2 = cut(f2)
    _, loss = m.model3(ff2, label)
    return f1, ff1, f2, ff2, loss


def test_the_split_step_done_right_is_healthy():
    def step(m):
        f1 = m.model1(tokens)
        ff1 = cut(f1)
        f2 = m.model2(ff1)
        ff2 = f2.clone().detach().requires_grad_(True)  # the post's cut
        _, loss = m.model3(ff2, label)
        loss.backward()
        f2.backward(ff2.grad)
        f1.backward(ff1.grad)
        for optimizer in make_optimizers(m):
            optimizer.step()

    m, checkup = split_checkup(step)
    assert checkup.healthy, checkup
    assert by_model(checkup, m) == {f"model{k}": {"learned"} for k in (1, 2, 3)}


def test_bug_1_a_cut_without_requires_grad():
    def step(m):
        f1 = m.model1(tokens)
        ff1 = f1.clone().detach()  # the bug: no .requires_grad_(True)
        f2 = m.model2(ff1)
        ff2 = f2.clone().detach()  # the same bug at the second cut
        _, loss = m.model3(ff2, label)
        loss.backward()
        f2.backward(ff2.grad)  # that is f2.backward(None)

    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        m, checkup = split_checkup(step)
    m = build_models(seed=42)
    with pytest.raises(RuntimeError), doctor(m.named_parameters()) as checkup:
        step(m)
    found = by_model(checkup, m)
    assert found["model1"] == found["model2"] == {"cut"}, checkup
    assert checkup.where("model1.layer.weight").code == (
        "ff1 = f1.clone().detach()  # the bug: no .requires_grad_(True)"
    )
    assert checkup.where("model2.layer.weight").code == (
        "ff2 = f2.clone().detach()  # the same bug at the second cut"
    )
    assert found["model3"] == {"no_step"}


def test_bug_2_backward_in_the_wrong_order():
    m = build_models(seed=42)
    with doctor(m.named_parameters()) as checkup:
        _f1, _ff1, f2, ff2, loss = forward_through_cuts(m)
        try:
            f2.backward(ff2.grad)  # the bug: stage 2 first
            loss.backward()
        except RuntimeError:
            pass  # caught, as 06 catches it: the doctor saw it anyway
    assert by_model(checkup, m) == {f"model{k}": {"stopped"} for k in (1, 2, 3)}, checkup
    assert (
        checkup.where("model3.layer.weight").code
        == "f2.backward(ff2.grad)  # the bug: stage 2 first"
    )
    assert "(RuntimeError: grad can be implicitly created only for scalar outputs)" in str(checkup)


def test_a_stage_whose_backward_is_never_called():
    m = build_models(seed=42)
    with doctor(m.named_parameters()) as checkup:
        _f1, _ff1, f2, ff2, loss = forward_through_cuts(m)
        loss.backward()
        f2.backward(ff2.grad)  # stage 1 forgotten
    found = by_model(checkup, m)
    assert found["model1"] == {"handoff_not_called"}
    assert checkup.where("model1.layer.weight").code == "ff1 = cut(f1)"
    assert found["model2"] == found["model3"] == {"no_step"}


def test_bug_3_the_middle_party_forgets_zero_grad():
    m = build_models(seed=42)
    optim1, optim2, optim3 = make_optimizers(m)

    def step():
        f1, ff1, f2, ff2, loss = forward_through_cuts(m)
        optim3.zero_grad()
        loss.backward()
        optim3.step()
        f2.backward(ff2.grad)  # optim2.zero_grad() forgotten before this line
        optim2.step()
        optim1.zero_grad()
        f1.backward(ff1.grad)
        optim1.step()

    step()  # step 1: .grad starts as None, no harm yet
    with doctor(m.named_parameters()) as checkup:
        step()
    found = by_model(checkup, m)
    assert found == {"model1": {"learned"}, "model2": {"leftover"}, "model3": {"learned"}}
    assert checkup.where("model2.layer.weight").code == (
        "f2.backward(ff2.grad)  # optim2.zero_grad() forgotten before this line"
    )


def test_bug_4_the_wrong_tensors_gradient():
    def step(m):
        f1, _ff1, f2, ff2, loss = forward_through_cuts(m)
        loss.backward()
        f2.backward(ff2.grad)
        f1.backward(ff2.grad)  # the bug: ff2's gradient handed to model 1
        for optimizer in make_optimizers(m):
            optimizer.step()

    checkup = model1_handed_the_wrong_gradient(step)
    assert checkup.where("model1.embed.weight").code == (
        "f1.backward(ff2.grad)  # the bug: ff2's gradient handed to model 1"
    )


def test_bug_4_with_the_gradient_copied_as_over_a_wire():
    def step(m):
        f1, _ff1, f2, ff2, loss = forward_through_cuts(m)
        loss.backward()
        f2.backward(ff2.grad.clone())  # a copy, as a message carries it: right
        f1.backward(ff2.grad.clone())  # the bug again, through a copy
        for optimizer in make_optimizers(m):
            optimizer.step()

    model1_handed_the_wrong_gradient(step)


def test_bug_4_handed_over_as_torch_autograd_backwards_grad_tensors():
    def step(m):
        f1, _ff1, f2, ff2, loss = forward_through_cuts(m)
        torch.autograd.backward(loss)
        torch.autograd.backward([f2], [ff2.grad])
        torch.autograd.backward(f1, grad_tensors=ff2.grad)  # the bug, by keyword
        for optimizer in make_optimizers(m):
            optimizer.step()

    checkup = model1_handed_the_wrong_gradient(step)
    assert checkup.where("model1.embed.weight").code == (
        "torch.autograd.backward(f1, grad_tensors=ff2.grad)  # the bug, by keyword"
    )


# -- more correct steps: no false alarm --------------------------------------------------------


def test_correct_steps_of_the_course_are_healthy():
    # 02: a plain loop with Adam, weight decay and clipping
    model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    with doctor(model) as checkup:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), target)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    assert checkup.healthy and not checkup.findings, checkup
    # batch norm, dropout, an embedding with integer inputs, argmax metrics, .item() logging
    model = nn.Sequential(
        nn.Embedding(10, 4),
        nn.Flatten(),
        nn.Linear(8, 4, bias=False),
        nn.BatchNorm1d(4),
        nn.Dropout(0.5),
        nn.Linear(4, 3),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ids, classes = torch.tensor([[1, 2], [3, 4]]), torch.tensor([0, 2])
    with doctor(model) as checkup:
        optimizer.zero_grad()
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits, classes)
        loss.backward()
        optimizer.step()
        accuracy = (logits.argmax(1) == classes).float().mean().item()
    assert checkup.healthy and not checkup.findings, checkup
    assert 0.0 <= accuracy <= 1.0
    # 09: a gradient penalty through create_graph=True
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with doctor(model) as checkup:
        inputs = x.clone().requires_grad_(True)
        out = model(inputs).sum()
        (g,) = torch.autograd.grad(out, inputs, create_graph=True)
        (out + g.pow(2).sum()).backward()
        optimizer.step()
    assert checkup.healthy and not checkup.findings, checkup


def test_a_mixed_precision_step_is_healthy():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scaler = torch.amp.GradScaler("cpu")
    with doctor(model) as checkup:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(x).float(), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    assert checkup.healthy and not checkup.findings, checkup


def test_the_step_computes_what_it_computes_without_the_doctor():
    plain, watched = ThreeLayers(), ThreeLayers()
    for model in (plain, watched):
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        with doctor(model) if model is watched else torch.enable_grad():
            loss_fn(model(x), target).backward()
            optimizer.step()
    for a, b in zip(plain.parameters(), watched.parameters(), strict=True):
        assert torch.equal(a, b) and torch.equal(a.grad, b.grad)


def test_the_doctor_leaves_nothing_behind():
    model = ThreeLayers()
    with doctor(model):
        loss_fn(model(x), target).backward()
    assert not model.first._forward_pre_hooks and not model.first.weight._backward_hooks
    assert not torch.overrides._get_current_function_mode_stack()
    from torch.optim.optimizer import _global_optimizer_pre_hooks

    assert not _global_optimizer_pre_hooks


# -- what the learner reads, and bad input -----------------------------------------------------


def test_a_notebook_cell_is_named_by_its_first_line_of_code(monkeypatch):
    import linecache

    class Compiler:
        _filename_map: ClassVar[dict[str, object]] = {
            CELL: 7,
            LONG: 8,
            FORTY: 9,
            COMMENTS: 10,
            FORTY_ONE: 11,
            "/tmp/odd.py": "11",  # not a cell number: a file
        }

    class Shell:
        compile = Compiler()

    lines = ["# a comment first\n", "\n", "model = Net()\n", "loss.backward()\n"]
    long_first = ["optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"]
    monkeypatch.setitem(linecache.cache, CELL, (0, None, lines, CELL))
    monkeypatch.setitem(linecache.cache, LONG, (0, None, long_first, LONG))
    forty = "x" * 36 + " = 1\n"  # 40 characters: shown whole
    monkeypatch.setitem(linecache.cache, FORTY, (0, None, [forty], FORTY))
    forty_one = "y" * 37 + " = 1\n"  # 41: cut to 39 and an ellipsis
    monkeypatch.setitem(linecache.cache, FORTY_ONE, (0, None, [forty_one], FORTY_ONE))
    monkeypatch.setitem(linecache.cache, COMMENTS, (0, None, ["# only\n"], COMMENTS))
    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())
    assert Location(CELL, 4, "<module>").label == 'the cell "model = Net()", line 4'
    assert str(Location(CELL, 4, "<module>")) == 'the cell "model = Net()", line 4: loss.backward()'
    assert Location(LONG, 1, "<module>").label == (
        'the cell "optimizer = torch.optim.SGD(model.param…", line 1'
    )
    assert Location("/home/me/train.py", 40, "main").label == "train.py:40"
    assert Location(FORTY, 1, "<module>").label == f'the cell "{forty.strip()}", line 1'
    assert Location(FORTY_ONE, 1, "<module>").label == f'the cell "{"y" * 37} =…", line 1'
    assert Location(COMMENTS, 1, "<module>").label == 'the cell "?", line 1'
    assert Location("/tmp/odd.py", 2, "<module>").label == "odd.py:2"


CELL, LONG = "/tmp/ipykernel_1/123.py", "/tmp/ipykernel_1/456.py"
FORTY, COMMENTS = "/tmp/ipykernel_1/789.py", "/tmp/ipykernel_1/012.py"
FORTY_ONE = "/tmp/ipykernel_1/345.py"


def test_the_report_shows_as_html():
    model = ThreeLayers()
    with doctor(model) as checkup:
        loss_fn(forward_detach(model, x), target).backward()
    page = checkup._repr_html_()
    assert "<table" in page and "⚠️ <b>first.weight, first.bias</b>" in page
    assert "<code>return model.last(model.middle(model.first(x).detach()))</code>" in page
    assert "2 finding(s) to fix:" in page  # the cut, and no step
    assert "its path to the loss was cut by <code>.detach()</code>." in page


STEP = "with doctor(model) as checkup: <one training step>"


def test_bad_input_gets_a_clear_message():
    def says(message):
        return f"^{re.escape(message)}$"

    how = "pass a model (nn.Module), a dict of name -> tensor, or model.named_parameters()"
    with pytest.raises(TypeError, match=says(f"doctor() is a float; {how}; {STEP}")):
        doctor(3.5)
    with pytest.raises(
        ValueError, match=says(f"doctor() got a model with no parameters, nothing to check; {STEP}")
    ):
        doctor(nn.ReLU())
    model = ThreeLayers()
    checkup = doctor(model)
    late = f"the checkup is read after its step: {STEP}, then read checkup"
    with pytest.raises(RuntimeError, match=says(late)):
        checkup.cause("first.weight")
    assert repr(checkup) == "<doctor checkup: ready>" and checkup.error is None
    with checkup:
        assert repr(checkup) == "<doctor checkup: running>"
        assert checkup._repr_html_() == "&lt;doctor checkup: running&gt;"
        loss_fn(model(x), target).backward()
    again = (
        "this checkup was already used for a step; make a new one: "
        "with doctor(model) as checkup: ..."
    )
    with pytest.raises(RuntimeError, match=says(again)):
        with checkup:
            pass
    names = ", ".join(ALL)
    with pytest.raises(KeyError, match=f"no parameter 'first'; the parameters are {names}"):
        checkup.cause("first")
    with pytest.raises(TypeError, match=says(f"doctor() got a checkup, not a model; {STEP}")):
        doctor(checkup)
    with pytest.raises(TypeError, match=r"Checkup\(ThreeLayers, ...\) takes the parameters"):
        Checkup(model, {})  # the class itself, handed a model
    with pytest.raises(TypeError, match=r"make it with doctor\(model\) instead"):
        Checkup(dict(model.named_parameters()), list(model.modules()))


def test_a_step_that_fails_is_told_where_and_why():
    model = ThreeLayers()
    with pytest.raises(RuntimeError, match="no labels this time") as caught:
        with doctor(model) as checkup:
            loss = loss_fn(model(x), target)
            raise RuntimeError("no labels this time")  # before backward
    assert checkup.error is caught.value and set(causes(checkup).values()) == {"stopped"}
    assert code(checkup, "first.weight") == (
        'raise RuntimeError("no labels this time")  # before backward'
    )
    assert "(RuntimeError: no labels this time)" in checkup.problems[0].message
    (note,) = caught.value.__notes__
    assert note.startswith("doctor: first.weight, ") and loss.requires_grad


def test_a_healthy_step_counts_what_it_checked():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        loss_fn(model(x), target).backward()
        optimizer.step()
    summary = f"Every parameter got a gradient and moved (or is frozen): {len(ALL)} checked."
    assert checkup.summary() == summary and checkup.error is None
    assert repr(checkup) == f"{checkup.rows!r}\n\n{summary}"


@pytest.mark.parametrize("step", ["run_split", "joint_step"])
def test_the_courses_own_split_steps_are_healthy(step):
    """06's split step (three optimizers, two hand-offs) and its joint reference, as the helpers
    run them: a clean bill, with every model's parameters learned."""
    m = build_models(seed=42)
    optimizers = make_optimizers(m)
    with doctor(m.named_parameters()) as checkup:
        getattr(split, step)(m, tokens, label, optimizers)
    assert checkup.healthy and checkup.findings == [], checkup
    assert set(by_model(checkup, m)) == {"model1", "model2", "model3"}
    assert {c for causes in by_model(checkup, m).values() for c in causes} == {"learned"}


def test_one_optimizer_over_all_three_models_is_healthy():
    """06b's arrangement: one optimizer holds every model's parameters."""
    m = build_models(seed=42)
    optimizer = torch.optim.Adam(list(m.named_parameters().values()), lr=0.01)
    with doctor(m.named_parameters()) as checkup:
        optimizer.zero_grad()
        split.run_split(m, tokens, label)
        optimizer.step()
    assert checkup.healthy and checkup.findings == [], checkup
    assert checkup.rows.column("optimizer") == ["Adam"] * 7


# -- what the model never registered (a question learners ask every week) ---------------------


class HiddenInAList(nn.Module):
    """Two hidden layers in a plain list, a scale that requires grad but is no nn.Parameter."""

    def __init__(self, container=list):
        super().__init__()
        torch.manual_seed(0)
        self.hidden = container([nn.Linear(2, 2), nn.Linear(2, 2)])
        self.scale = torch.ones(1, requires_grad=True)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        layers = self.hidden.values() if isinstance(self.hidden, dict) else self.hidden
        for layer in layers:
            x = torch.tanh(layer(x))
        return self.head(x) * self.scale


HIDDEN = ["hidden[0].weight", "hidden[0].bias", "hidden[1].weight", "hidden[1].bias"]


def one_step(model, optimizer):
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(x), target).backward()
        optimizer.step()
    return checkup


def test_layers_in_a_plain_list_and_a_tensor_attribute_are_never_registered():
    model = HiddenInAList()
    checkup = one_step(model, torch.optim.SGD(model.parameters(), lr=LR))
    assert not checkup.healthy
    assert {name: checkup.cause(name) for name in HIDDEN + ["scale"]} == dict.fromkeys(
        HIDDEN + ["scale"], "unregistered"
    )
    assert checkup.cause("head.weight") == "learned"
    made = "self.hidden = container([nn.Linear(2, 2), nn.Linear(2, 2)])"
    assert code(checkup, "hidden[1].bias") == made
    assert code(checkup, "scale") == "self.scale = torch.ones(1, requires_grad=True)"
    layers, scale = checkup.problems
    assert layers.parameters == tuple(HIDDEN)
    assert "`self.hidden` is a plain Python list" in layers.message
    assert "Keep them in nn.ModuleList instead." in layers.message
    assert scale.parameters == ("scale",)
    assert "Make it `self.scale = nn.Parameter(...)`." in scale.message
    assert checkup.rows.column("optimizer")[2:] == ["none"] * 5
    assert checkup.rows.column("gradient")[2:] == ["finite"] * 5  # the gradient arrives: unused
    assert checkup.summary() == "2 finding(s) to fix:"


@pytest.mark.parametrize(
    ("container", "holder", "fix"),
    [
        (tuple, "tuple", "nn.ModuleList"),
        (lambda layers: dict(enumerate(layers)), "dict", "nn.ModuleDict"),
    ],
)
def test_a_tuple_or_a_dict_of_layers_is_never_registered_either(container, holder, fix):
    model = HiddenInAList(container)
    checkup = one_step(model, torch.optim.SGD(model.parameters(), lr=LR))
    layers = checkup.problems[0]
    assert f"`self.hidden` is a plain Python {holder}" in layers.message
    assert f"Keep them in {fix} instead." in layers.message
    if holder == "dict":
        assert layers.parameters[0] == "hidden[0].weight"


def test_registered_containers_and_parameters_get_a_clean_bill():
    class Registered(HiddenInAList):
        def __init__(self):
            super().__init__()
            self.hidden = nn.ModuleList(self.hidden)
            self.scale = nn.Parameter(self.scale.detach())

    checkup = one_step(model := Registered(), torch.optim.SGD(model.parameters(), lr=LR))
    assert checkup.healthy and not checkup.findings, checkup
    assert "hidden.0.weight" in checkup.rows.column("parameter")


def test_an_unregistered_tensor_handed_to_the_optimizer_by_hand_learns():
    model = HiddenInAList()
    extra = [p for layer in model.hidden for p in layer.parameters()] + [model.scale]
    checkup = one_step(model, torch.optim.SGD([*model.parameters(), *extra], lr=LR))
    assert checkup.healthy, checkup
    assert checkup.cause("scale") == "learned"


def test_what_the_step_never_used_or_needs_no_gradient_is_not_listed():
    class Quiet(nn.Module):
        def __init__(self):
            super().__init__()
            self.spare = [nn.Linear(2, 2)]  # never called
            self.offset = torch.zeros(1)  # a constant: requires no grad
            self.head = nn.Linear(2, 1)

        def forward(self, x):
            return self.head(x) + self.offset

    checkup = one_step(model := Quiet(), torch.optim.SGD(model.parameters(), lr=LR))
    assert checkup.healthy, checkup
    assert checkup.rows.column("parameter") == ["head.weight", "head.bias"]


def test_a_model_whose_every_layer_is_in_a_plain_list_is_checked_not_refused():
    class AllInAList(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(2, 1)]

        def forward(self, x):
            return self.layers[0](x)

    model = AllInAList()
    assert list(model.parameters()) == []
    layer = model.layers[0]
    with doctor(model) as checkup:  # torch refuses an optimizer over no parameters: none here
        loss_fn(model(x), target).backward()
    assert checkup.cause("layers[0].weight") == "unregistered"
    assert layer.weight.grad is not None  # the gradient arrived, and nothing would use it


class WithAuxHead(nn.Module):
    """A head whose output is only logged and measured, never put in the loss."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.head, self.aux = nn.Linear(4, 8), nn.Linear(8, 3), nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.body(x))
        self.aux_out = self.aux(h)
        return self.head(h)


def test_a_cut_that_no_loss_came_through_is_not_blamed():
    """Logging aux's output with .item() and measuring its accuracy with argmax cut nothing the
    loss needed: aux is "not on the loss's path", named where it was used, not at the log line."""
    model = WithAuxHead()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch, classes = torch.randn(16, 4), torch.randint(0, 3, (16,))
    with doctor(model) as checkup:
        optimizer.zero_grad()
        logits = model(batch)
        print(f"aux {model.aux_out.mean().item():.3f}")
        accuracy = (model.aux_out.argmax(1) == classes).float().mean()
        nn.functional.cross_entropy(logits, classes).backward()
        optimizer.step()
    assert 0 <= accuracy <= 1
    assert checkup.cause("aux.weight") == "not_reaching_loss"
    assert checkup.where("aux.bias").code == "self.aux_out = self.aux(h)"
    assert checkup.cause("body.weight") == checkup.cause("head.weight") == "learned"


def test_a_python_value_that_comes_back_into_the_loss_is_the_cut():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        h = torch.tensor(model.first(x).tolist())  # through Python lists and back
        loss_fn(model.last(model.middle(h)), target).backward()
        optimizer.step()
    assert checkup.cause("first.weight") == "cut"
    assert checkup.where("first.bias").code.startswith("h = torch.tensor(model.first(x).tolist())")


# -- what each verdict says is what the doctor saw --------------------------------------------


class WithAScale(nn.Module):
    """A learned scale written as many write it: a tensor computed from a leaf, not a leaf."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(2, 1)
        self.scale = torch.randn(1, requires_grad=True) * 0.1

    def forward(self, x):
        return self.head(x) * self.scale


def test_a_scale_computed_from_a_leaf_is_never_registered():
    model = WithAScale()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    checkup = one_step(model, optimizer)
    assert checkup.cause("scale") == "unregistered" and checkup.cause("head.weight") == "learned"
    assert code(checkup, "scale") == "self.scale = torch.randn(1, requires_grad=True) * 0.1"
    (finding,) = checkup.problems
    assert "`self.scale` is a tensor computed from one that requires grad" in finding.message
    assert "Make the value itself the parameter: `self.scale = nn.Parameter(...)`" in (
        finding.message
    )
    with pytest.raises(ValueError, match="optimize a non-leaf Tensor"):  # what the message says
        torch.optim.SGD([model.scale], lr=LR)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        one_step(model, optimizer)  # the next step, as the message says


class TiedView(nn.Module):
    """A decoder tied to its encoder through a view kept in __init__: it follows the weight."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(torch.randn(3, 2))
        self.weight_t = self.weight.t()  # computed from a registered leaf: nothing to register

    def forward(self, x):
        return ((x @ self.weight_t) @ self.weight).sum(1, keepdim=True)  # encode, decode


def test_a_tensor_computed_from_registered_parameters_is_no_unregistered_one():
    model = TiedView()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(2):
        checkup = one_step(model, optimizer)
        assert checkup.healthy and checkup.rows.column("parameter") == ["weight"], checkup
    assert torch.equal(model.weight_t, model.weight.t())  # the view followed both steps


class Blocks(nn.Module):
    """Blocks of layers in a list of lists, as a learner groups them."""

    def __init__(self, outer=list):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = outer([[nn.Linear(2, 2), nn.Linear(2, 2)], [nn.Linear(2, 2)]])
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        blocks = self.blocks.values() if isinstance(self.blocks, dict) else self.blocks
        for block in blocks:
            for layer in block:
                x = torch.tanh(layer(x))
        return self.head(x)


@pytest.mark.parametrize(
    ("outer", "holder", "fix"),
    [
        (list, "list", "nn.ModuleList([nn.ModuleList([...]), ...])"),
        (
            lambda blocks: dict(enumerate(blocks)),
            "dict",
            "nn.ModuleDict({key: nn.ModuleList([...]), ...})",
        ),
    ],
)
def test_layers_in_a_list_of_lists_are_never_registered(outer, holder, fix):
    model = Blocks(outer)
    checkup = one_step(model, torch.optim.SGD(model.parameters(), lr=LR))
    assert checkup.cause("blocks[0][1].weight") == "unregistered"
    assert checkup.cause("blocks[1][0].bias") == "unregistered"
    assert checkup.cause("head.weight") == "learned"
    (finding,) = checkup.problems
    assert len(finding.parameters) == 6
    assert f"`self.blocks` is a plain Python {holder} with containers inside it" in finding.message
    assert finding.message.endswith(f"nested the same way: `{fix}`.")
    assert finding.location.code.startswith("self.blocks = outer([[nn.Linear(2, 2)")


def test_a_step_that_makes_the_weights_infinite_has_not_learned():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e38)  # far too large
    raw = x * 100  # inputs left unscaled: gradients of hundreds
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(raw), target).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"diverged"} and not checkup.healthy
    assert checkup.rows.column("gradient") == ["finite"] * 6
    assert checkup.rows.column("verdict")[-1] == "values NaN/inf"
    assert code(checkup, "last.bias") == "optimizer.step()"
    finding = next(f for f in checkup.problems if "last.bias" in f.parameters)
    assert "its gradient was finite, but after the step its values hold inf" in finding.message
    assert "too large for float32" in finding.message
    assert "Every parameter got a gradient and moved" not in repr(checkup)


def test_gradients_from_autograd_grad_applied_by_hand_are_learned():
    """Meta-learning and functional code: torch.autograd.grad, then an update with what it
    returned, .grad never touched."""
    model = ThreeLayers()
    with doctor(model) as checkup:
        loss = loss_fn(model(x), target)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= LR * g
    assert checkup.healthy and set(causes(checkup).values()) == {"learned"}, checkup
    assert checkup.rows.column("gradient") == ["finite"] * 6
    assert all(p.grad is None for p in model.parameters())


def test_gradients_from_autograd_grad_that_never_reach_grad_are_named():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        optimizer.step()  # reads .grad: None
    assert set(causes(checkup).values()) == {"grad_returned"}
    assert code(checkup, "first.weight") == (
        "grads = torch.autograd.grad(loss, list(model.parameters()))"
    )
    assert len(grads) == 6
    assert "it is not in .grad, which step() reads" in checkup.findings[0].message
    with doctor(model := ThreeLayers()) as checkup:  # no gradient at all: none computed
        loss_fn(model(x), target)
    assert checkup.findings[0].message.startswith(
        "no backward() ran inside the block, and no torch.autograd.grad computed its gradient"
    )


def test_a_zero_gradient_that_momentum_moved_says_so():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):  # earlier steps fill the momentum
        optimizer.zero_grad()
        loss_fn(model(x), target).backward()
        optimizer.step()
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # now the ReLU is off for every input
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(x), target).backward()
        optimizer.step()
    assert checkup.cause("0.weight") == "zero_gradient"
    rows = checkup.rows.column("parameter"), checkup.rows.column("max |Δ|")
    moved = dict(zip(*rows, strict=True))
    assert moved["0.weight"] > 0
    finding = next(f for f in checkup.problems if "0.weight" in f.parameters)
    assert "It moved all the same, by what the optimizer carries" in finding.message
    assert "did not move it" not in finding.message


def test_a_nan_made_in_the_forward_pass_is_named_where_it_was_made():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:
        optimizer.zero_grad()
        out = model(x)
        log_error = torch.log(out - target)  # below 0 where out < target: NaN
        loss = log_error.pow(2).mean()
        loss.backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"nonfinite"}
    assert code(checkup, "first.weight") == (
        "log_error = torch.log(out - target)  # below 0 where out < target: NaN"
    )
    (finding,) = checkup.findings
    assert "because the loss itself was already NaN" in finding.message
    assert "turned finite values into NaN: `log()`, at this line." in finding.message


def test_a_nan_that_came_in_with_the_batch_or_was_made_before_the_model():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    batch = x.clone()
    batch[0, 1] = float("nan")  # a missing value in the data
    with doctor(model) as checkup:
        optimizer.zero_grad()
        loss_fn(model(batch), target).backward()
        optimizer.step()
    (finding,) = checkup.findings
    assert finding.cause == "nonfinite" and "it came in with what the step started from" in (
        finding.message
    )
    prices = torch.tensor([[0.0, 2.0], [3.0, 1.0]])  # a price of 0
    with doctor(model := ThreeLayers()) as checkup:
        features = torch.log(prices)  # -inf, with no graph
        loss_fn(model(features), target).backward()
    (finding,) = checkup.findings
    assert finding.location.code == "features = torch.log(prices)  # -inf, with no graph"
    assert "turned finite values into inf: `log()`" in finding.message
    assert "did not find it on the loss's graph" in finding.message


def test_the_last_micro_batch_of_an_accumulation_alone_is_told_both_readings():
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    optimizer.zero_grad()
    loss_fn(model(x[:1]), target[:1]).backward()  # micro-batch 1 of 2
    with doctor(model) as checkup:  # wraps micro-batch 2 and the step
        loss_fn(model(x[1:]), target[1:]).backward()
        optimizer.step()
    assert set(causes(checkup).values()) == {"leftover"}
    (finding,) = checkup.findings
    assert "a gradient was already in .grad when the block began" in finding.message
    assert "wrap one whole step, from zero_grad() through every micro-batch's backward()" in (
        finding.message
    )
    model = ThreeLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with doctor(model) as checkup:  # the whole step wrapped: accumulation, said and not blamed
        optimizer.zero_grad()
        for micro in (slice(0, 1), slice(1, 2)):
            loss_fn(model(x[micro]), target[micro]).backward()
        optimizer.step()
    assert checkup.healthy and set(causes(checkup).values()) == {"accumulated"}


def test_a_step_moved_by_gradients_the_doctor_cannot_see_is_not_told_it_got_none():
    model = ThreeLayers()
    params = dict(model.named_parameters())

    def loss_of(params):
        return loss_fn(torch.func.functional_call(model, params, (x,)), target)

    with doctor(model) as checkup:
        grads = torch.func.grad(loss_of)(params)
        with torch.no_grad():
            for name, p in params.items():
                p -= LR * grads[name]
    assert set(causes(checkup).values()) == {"no_backward"}
    (finding,) = checkup.findings
    assert "yet it moved: something else updated it" in finding.message
    assert "torch.func.grad" in finding.message and "so it got none" not in finding.message
