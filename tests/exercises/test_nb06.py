"""Checkers of notebook 06: right answers pass, typical wrong answers get the specific message."""

import pytest
import torch
from torch import nn

from helpers.checks import clean_message
from helpers.exercises.nb06 import (
    check_handoff,
    check_one_optimizer,
    check_token_loss,
    previous_step,
)
from helpers.params import snapshot
from helpers.split import (
    MLP2L,
    SplitModels,
    build_models,
    cut,
    make_one_optimizer,
    post_tensors,
    run_split,
)
from tests.exercises.common import text
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)

TOKENS, LABEL = post_tensors()


def forward(models, cut_fn=cut, tokens=TOKENS, label=LABEL):
    f1 = models.model1(tokens)
    ff1 = cut_fn(f1)
    f2 = models.model2(ff1)
    ff2 = cut_fn(f2)
    _, loss = models.model3(ff2, label)
    return f1, ff1, f2, ff2, loss


# --- exercise 1: hand the gradients back ----------------------------------------------------------


def handoff(stage2=None, stage1=None, cut_fn=cut, stage3_twice=False):
    m = build_models()
    f1, ff1, f2, ff2, loss = forward(m, cut_fn)
    loss.backward(retain_graph=stage3_twice)
    if stage3_twice:
        loss.backward()
    if stage2:
        stage2(f1, ff1, f2, ff2)
    if stage1:
        stage1(f1, ff1, f2, ff2)
    return check_handoff(m, ff1, ff2)


def right2(f1, ff1, f2, ff2):
    f2.backward(ff2.grad)


def right1(f1, ff1, f2, ff2):
    f1.backward(ff1.grad)


def test_handoff_right_answer_passes():
    result = handoff(right2, right1)
    assert result.ok, result
    assert "hand-off is right" in repr(result)


def test_handoff_autograd_backward_form_passes():
    result = handoff(
        lambda f1, ff1, f2, ff2: torch.autograd.backward([f2], [ff2.grad]),
        lambda f1, ff1, f2, ff2: torch.autograd.backward([f1], [ff1.grad]),
    )
    assert result.ok, result


def test_handoff_placeholder_says_what_is_missing():
    result = handoff()
    assert not result.ok
    assert "model 2 has no gradients yet" in text(result)
    assert "model 1 has no gradients yet" in text(result)


def test_handoff_stage_1_missing():
    result = handoff(right2)
    assert text(result) == (
        "model 1 has no gradients yet: hand ff1.grad back with f1.backward(ff1.grad)"
    )


def test_handoff_wrong_tensors_gradient():
    result = handoff(right2, lambda f1, ff1, f2, ff2: f1.backward(ff2.grad))
    assert "these are the gradients ff2.grad gives" in text(result)


def test_handoff_activation_instead_of_gradient():
    result = handoff(right2, lambda f1, ff1, f2, ff2: f1.backward(ff1.detach()))
    assert "you handed back ff1 itself" in text(result)


def test_handoff_stage_1_twice_is_doubled():
    def twice(f1, ff1, f2, ff2):
        f1.backward(ff1.grad, retain_graph=True)
        f1.backward(ff1.grad)

    assert "doubled: f1.backward() ran twice" in text(handoff(right2, twice))


def test_handoff_run_twice_is_named_not_blamed_on_f1_alone():
    def stage2_twice(f1, ff1, f2, ff2):
        f2.backward(ff2.grad, retain_graph=True)

    def both_twice(f1, ff1, f2, ff2):  # the pair, run a second time
        f1.backward(ff1.grad, retain_graph=True)
        f2.backward(ff2.grad)
        f1.backward(ff1.grad)

    assert handoff(stage2_twice, both_twice).messages == [
        "model 2's gradients are doubled: its backward ran twice (each call adds to .grad)",
        "model 1's gradients differ from the joint run's: they are three times the joint run's: "
        "the whole hand-off ran twice. The second f2.backward() added to ff1.grad, so the second "
        "f1.backward() passed twice the gradient (1 + 2 = 3). Run each stage's backward once per "
        "step",
    ]


def test_handoff_stage_3_twice_is_doubled():
    result = handoff(right2, right1, stage3_twice=True)
    assert "model 3's gradients are doubled" in text(result)


def test_handoff_stage_2_with_a_wrong_gradient():
    result = handoff(lambda f1, ff1, f2, ff2: f2.backward(torch.ones_like(f2)), right1)
    assert "model 2's gradients differ from the joint run's" in text(result)


def test_handoff_cut_without_requires_grad():
    result = handoff(cut_fn=lambda t: t.clone().detach())
    assert "ff2 does not require grad" in text(result)


def test_handoff_ff1_grad_cleared_afterwards_is_not_right():
    def cleared(f1, ff1, f2, ff2):
        f1.backward(ff1.grad)
        ff1.grad.zero_()  # model 1's gradients are right; the hand-off tensor is gone

    result = handoff(right2, cleared)
    assert not result.ok
    assert text(result).startswith("ff1.grad is all zeros, though model 1's gradients are right")


def test_handoff_ff1_grad_changed_afterwards_is_not_right():
    def doubled(f1, ff1, f2, ff2):
        f1.backward(ff1.grad)
        ff1.grad.mul_(2)

    result = handoff(right2, doubled)
    assert text(result) == "ff1.grad differs from f1.grad of the joint run"


def test_handoff_ff1_grad_set_to_none_afterwards_is_not_right():
    def dropped(f1, ff1, f2, ff2):
        f1.backward(ff1.grad)
        ff1.grad = None

    result = handoff(right2, dropped)
    assert text(result).startswith("ff1.grad is None, though ff1 requires grad")


def test_handoff_cut_f1_without_requires_grad():
    m = build_models()
    ff1 = m.model1(TOKENS).detach().clone()  # the bug: no requires_grad_() at cut 1
    f2 = m.model2(ff1)
    ff2 = cut(f2)
    m.model3(ff2, LABEL)[1].backward()
    f2.backward(ff2.grad)  # model 2's gradients are right, and ff1 gets none
    assert "cut f1 with requires_grad_(True)" in text(check_handoff(m, ff1, ff2))


@pytest.mark.parametrize(
    ("models", "ff1", "ff2", "message"),
    [
        (..., torch.zeros(1), torch.zeros(1), "models is an ellipsis"),
        (None, torch.zeros(1), torch.zeros(1), "not the SplitModels"),
        ("models", ..., torch.zeros(1), "ff1 is an ellipsis"),
    ],
)
def test_handoff_bad_arguments_never_raise(models, ff1, ff2, message):
    if models == "models":
        models = build_models()
    result = check_handoff(models, ff1, ff2)
    assert not result.ok and message in text(result)


# --- exercise 2: one optimizer, placed right ------------------------------------------------------


def one_optimizer(steps):
    """Run `steps(opt, f1, ff1, f2, ff2, loss)` on fresh models; check the result."""
    m = build_models()
    opt = make_one_optimizer(m)
    before = snapshot(m.named_parameters())
    f1, ff1, f2, ff2, loss = forward(m)
    steps(opt, f1, ff1, f2, ff2, loss)
    return check_one_optimizer(m, before)


def right_steps(opt, f1, ff1, f2, ff2, loss):
    opt.zero_grad()
    loss.backward()
    f2.backward(ff2.grad)
    f1.backward(ff1.grad)
    opt.step()


def without_zero_grad(opt, f1, ff1, f2, ff2, loss):
    """The right steps but zero_grad(): the gradients already in .grad are added to."""
    loss.backward()
    f2.backward(ff2.grad)
    f1.backward(ff1.grad)
    opt.step()


def test_one_optimizer_right_answer_passes():
    result = one_optimizer(right_steps)
    assert result.ok, result


def test_one_optimizer_placeholder():
    assert "no parameter changed" in text(one_optimizer(lambda *a: None))


def test_one_optimizer_step_right_after_the_loss():
    def early(opt, f1, ff1, f2, ff2, loss):
        opt.zero_grad()
        loss.backward()
        opt.step()
        f2.backward(ff2.grad)
        f1.backward(ff1.grad)

    assert "only model 3 changed" in text(one_optimizer(early))


def test_one_optimizer_zero_grad_between_the_backward_calls():
    def wiped(opt, f1, ff1, f2, ff2, loss):
        loss.backward()
        f2.backward(ff2.grad)
        opt.zero_grad()
        f1.backward(ff1.grad)
        opt.step()

    assert "model2 and model3 did not change" in text(one_optimizer(wiped))
    # the same message when the models start from the previous batch's gradients
    assert "model2 and model3 did not change" in text(one_optimizer_after_a_step(wiped))


def test_one_optimizer_stepped_twice():
    def twice(opt, f1, ff1, f2, ff2, loss):
        right_steps(opt, f1, ff1, f2, ff2, loss)
        opt.step()

    assert "not by one Adam step" in text(one_optimizer(twice))


def test_one_optimizer_does_not_touch_the_global_seed():
    m = build_models()
    before = snapshot(m.named_parameters())
    right_steps(make_one_optimizer(m), *forward(m))
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    assert check_one_optimizer(m, before).ok
    assert torch.equal(torch.rand(1), expected)


def test_one_optimizer_bad_arguments_never_raise():
    assert "before is an ellipsis" in text(check_one_optimizer(build_models(), ...))
    assert "not the SplitModels" in text(check_one_optimizer(None, {}))
    broken = check_one_optimizer(build_models(), {"x": torch.zeros(1)})
    assert "could not compare with the reference step" in text(broken)


# --- exercise 3: the loss the post meant ----------------------------------------------------------


def out_tensor():
    m = build_models()
    return m.model3.layer(m.model2(m.model1(TOKENS)))


ONES = torch.tensor([[1, 1, 1, 1, 1]])


@pytest.mark.parametrize(
    "make",
    [
        lambda out: (ONES, nn.CrossEntropyLoss()(out.permute(0, 2, 1), ONES)),
        lambda out: (ONES.reshape(-1), nn.CrossEntropyLoss()(out.reshape(-1, 3), ONES.reshape(-1))),
        lambda out: (
            torch.tensor([0.0, 1.0, 0.0]).expand(1, 5, 3),
            nn.CrossEntropyLoss()(
                out.permute(0, 2, 1), torch.tensor([0.0, 1.0, 0.0]).expand(1, 5, 3).permute(0, 2, 1)
            ),
        ),
    ],
    ids=["permute", "flatten", "probabilities"],
)
def test_token_loss_right_answers_pass(make):
    out = out_tensor()
    target, loss = make(out)
    result = check_token_loss(out, target, loss)
    assert result.ok, result


def test_token_loss_placeholders():
    result = check_token_loss(out_tensor(), ..., ...)
    assert "target is still `...`" in text(result) and "loss is still `...`" in text(result)


def test_token_loss_the_posts_loss():
    out = out_tensor()
    result = check_token_loss(out, ONES, nn.CrossEntropyLoss()(out, LABEL))
    assert "this is the post's loss" in text(result)


def test_token_loss_wrong_target_values_and_types():
    out = out_tensor()
    loss = nn.CrossEntropyLoss()(out.reshape(-1, 3), ONES.reshape(-1))
    assert "every token's class is 1" in text(check_token_loss(out, torch.zeros(1, 5).long(), loss))
    assert "dtype long" in text(check_token_loss(out, ONES.float(), loss))
    assert "one class index per token makes 5" in text(check_token_loss(out, LABEL, loss))
    assert "make it a tensor" in text(check_token_loss(out, [1, 1, 1, 1, 1], loss))


def test_token_loss_sum_detached_and_wrong():
    out = out_tensor()
    flat, target = out.reshape(-1, 3), ONES.reshape(-1)
    summed = nn.CrossEntropyLoss(reduction="sum")(flat, target)
    assert "the sum over tokens" in text(check_token_loss(out, ONES, summed))
    detached = nn.CrossEntropyLoss()(flat.detach(), target)
    assert "loss has no grad_fn" in text(check_token_loss(out, ONES, detached))
    other = nn.CrossEntropyLoss()(flat, torch.zeros(5, dtype=torch.long))
    assert "mean cross-entropy of class 1" in text(check_token_loss(out, ONES, other))
    assert "single-number tensor" in text(check_token_loss(out, ONES, flat))


def test_token_loss_bad_out_never_raises():
    assert "shape [1, 5, 3]" in text(check_token_loss(..., ONES, ...))


# --- messages in full, and inputs other than the post's ------------------------------------------


def test_handoff_messages_say_which_stage_and_how_to_hand_back():
    assert handoff().messages == [
        "model 2 has no gradients yet: hand the gradient back with f2.backward(ff2.grad), after "
        "loss.backward()",
        "model 1 has no gradients yet: hand ff1.grad back with f1.backward(ff1.grad)",
    ]
    wrong2 = handoff(lambda f1, ff1, f2, ff2: f2.backward(torch.ones_like(f2)), right1)
    assert wrong2.messages[0] == (
        "model 2's gradients differ from the joint run's: hand the gradient back with "
        "f2.backward(ff2.grad), after loss.backward()"
    )
    wrong1 = handoff(right2, lambda f1, ff1, f2, ff2: f1.backward(ff2.grad))
    assert wrong1.messages[0].startswith("model 1's gradients differ from the joint run's: ")


def test_handoff_names_a_cut_that_is_missing_or_has_no_gradient():
    m = build_models()
    r = run_split(m, TOKENS, LABEL)
    assert check_handoff(m, r.ff1, 3).messages == ["ff2 is an int, not the tensor at the cut"]
    r.ff2.grad = None
    assert check_handoff(m, r.ff1, r.ff2).messages == [
        "ff2.grad is None: run loss.backward() first (stage 3)"
    ]


def test_handoff_of_a_tensor_of_another_shape_is_not_right():
    m = build_models()
    r = run_split(m, TOKENS, LABEL)
    other = torch.ones(2, requires_grad=True)
    other.grad = torch.ones(2)
    assert check_handoff(m, other, r.ff2).messages == [
        "ff1.grad differs from f1.grad of the joint run"
    ]


def test_handoff_reports_a_joint_run_that_cannot_run():
    good = build_models()
    r = run_split(good, TOKENS, LABEL)
    bad = SplitModels(good.model1, good.model2, MLP2L(4, 3))  # model 3 expects 4 features
    with pytest.raises(RuntimeError) as raised:
        bad.model3.layer(torch.ones(5, 6))
    assert check_handoff(bad, r.ff1, r.ff2).messages == [
        f"could not run the joint reference: {clean_message(str(raised.value))}"
    ]


def test_handoff_uses_the_input_it_is_given_and_the_posts_unless_both_are():
    tokens = torch.tensor([[4, 4, 7, 1, 0]])
    m = build_models()
    r = run_split(m, tokens, LABEL)
    assert check_handoff(m, r.ff1, r.ff2, tokens, LABEL).ok
    assert not check_handoff(m, r.ff1, r.ff2).ok  # compared with the post's input
    post = build_models()
    p = run_split(post, TOKENS, LABEL)
    assert check_handoff(post, p.ff1, p.ff2, tokens=tokens).ok  # a label alone is not enough
    assert check_handoff(post, p.ff1, p.ff2, label=LABEL).ok


def one_optimizer_run(lr=0.01, dims=(10, 6, 6, 3), embedding_dim=None, tokens=TOKENS):
    m = build_models(dims=dims, embedding_dim=embedding_dim)
    before = snapshot(m.named_parameters())
    right_steps(make_one_optimizer(m, lr), *forward(m, tokens=tokens))
    return m, before


def test_one_optimizer_uses_the_lr_and_the_input_it_is_given():
    m, before = one_optimizer_run(lr=0.1)
    result = check_one_optimizer(m, before, lr=0.1)
    assert result.success == (
        "One Adam over all three models, stepped once at the end, gives exactly the post's "
        "per-model result."
    )
    assert result.ok
    assert check_one_optimizer(m, before).messages == [
        "all three models changed, but model1, model2, model3 not by one Adam step (lr 0.01) "
        "with the joint gradients: call zero_grad() once before the backward calls and step() "
        "once after them"
    ]
    tokens = torch.tensor([[4, 4, 7, 1, 0]])
    m, before = one_optimizer_run(tokens=tokens)
    assert check_one_optimizer(m, before, tokens, LABEL).ok
    assert not check_one_optimizer(m, before).ok
    post, post_before = one_optimizer_run()
    assert check_one_optimizer(post, post_before, tokens=tokens).ok  # the post's input, both


def test_one_optimizer_works_for_models_of_other_widths():
    m, before = one_optimizer_run(dims=(10, 6, 4, 3), embedding_dim=5)
    assert check_one_optimizer(m, before).ok


def test_one_optimizer_names_what_stopped_the_reference_step():
    result = check_one_optimizer(build_models(), {"x": torch.zeros(1)})
    assert result.messages == ["could not compare with the reference step: 'model1.embed.weight'"]


def test_token_loss_target_messages_in_full():
    out = out_tensor()
    loss = nn.CrossEntropyLoss()(out.reshape(-1, 3), ONES.reshape(-1))
    cases = [
        ([1, 1, 1, 1, 1], "target is a list; make it a tensor"),
        (
            ONES.float(),
            "target is a float tensor, so CrossEntropyLoss reads it as class probabilities; "
            "indices must be integers: torch.tensor([[1] * 5]) (dtype long)",
        ),
        (
            torch.tensor([1.0, 0.0, 0.0]).expand(1, 5, 3),
            "as probabilities, every token's row should be [0, 1, 0]",
        ),
        (LABEL, "target has 3 elements; one class index per token makes 5"),
    ]
    for target, message in cases:
        assert check_token_loss(out, target, loss).messages == [message]


def test_token_loss_a_wrong_value_is_shown_rounded_and_the_right_one_praised():
    out = out_tensor()
    flat, target = out.reshape(-1, 3), ONES.reshape(-1)
    right = nn.CrossEntropyLoss()(flat, target)
    assert check_token_loss(out, ONES, right).success == (
        "Right: each token's 3 scores against class 1, averaged."
    )
    advice = (
        "but the mean cross-entropy of class 1 over the 5 tokens is different; use "
        "nn.CrossEntropyLoss() with the classes in dim 1: out.permute(0, 2, 1), or "
        "out.reshape(-1, 3) with target.reshape(-1)"
    )
    summed = nn.CrossEntropyLoss(reduction="sum")(flat, target)
    for loss in (right + 0.5, summed + 0.5):  # near a known answer is not that answer
        value = float(loss.detach())
        shown = round(value, 4)
        assert shown != value
        assert check_token_loss(out, ONES, loss).messages == [f"loss is {shown}, {advice}"]
    no_value = check_token_loss(out, ONES, torch.tensor(1 + 2j))
    assert no_value.messages == [f"loss is None, {advice}"]


def test_token_loss_checks_outputs_of_other_sizes():
    four = nn.Linear(6, 4)(torch.ones(1, 5, 6))  # 4 classes: no post's call to compare with
    target = torch.ones(1, 5, dtype=torch.long)
    loss = nn.CrossEntropyLoss()(four.reshape(-1, 4), target.reshape(-1))
    assert check_token_loss(four, target, loss).ok
    two = nn.Linear(6, 3)(torch.arange(12.0).reshape(1, 2, 6))  # 2 tokens: the post's call runs
    posts = nn.CrossEntropyLoss()(two, torch.tensor([[0, 1, 0]]))
    result = check_token_loss(two, torch.ones(1, 2, dtype=torch.long), posts)
    assert result.messages[0].startswith("this is the post's loss")
    one = nn.Linear(6, 3)(torch.ones(1, 1, 6))  # 1 token: the post's call cannot run
    one_target = torch.ones(1, 1, dtype=torch.long)
    loss = nn.CrossEntropyLoss()(one.reshape(-1, 3), one_target.reshape(-1))
    assert isinstance(check_token_loss(one, one_target, loss).messages, list)  # never raises


def one_optimizer_after_a_step(steps, tokens=None, label=None):
    """As `one_optimizer`, on models whose .grad still hold the previous batch's gradients (the
    notebook's exercise cell starts so); on the post's batch, or on `tokens` and `label`."""
    m = build_models()
    opt = make_one_optimizer(m)
    previous_step(m, tokens, label)
    before = snapshot(m.named_parameters())
    batch = {} if tokens is None else {"tokens": tokens, "label": label}
    steps(opt, *forward(m, **batch))
    return check_one_optimizer(m, before, tokens, label)


def test_one_optimizer_without_zero_grad_is_named():
    assert one_optimizer_after_a_step(right_steps).ok
    assert "the earlier step's gradients were still in .grad" in text(
        one_optimizer_after_a_step(without_zero_grad)
    )
    assert one_optimizer(without_zero_grad).ok  # fresh models cannot tell: hence previous_step


def test_the_batch_before_is_the_one_the_exercise_names():
    """On another batch (two sequences), the checker's batch before is made from that batch, as
    the learner's `previous_step(models, tokens, label)` made it: a kept gradient is named, and
    the right answer passes."""
    tokens = torch.tensor([[2, 1, 3, 0, 9], [4, 4, 5, 6, 7]])
    label = torch.tensor([[0, 1, 0], [2, 0, 1]])

    assert one_optimizer_after_a_step(right_steps, tokens, label).ok
    assert "the earlier step's gradients were still in .grad" in text(
        one_optimizer_after_a_step(without_zero_grad, tokens, label)
    )
    stepped, by_hand = build_models(), build_models()
    previous_step(stepped, tokens, label)  # the batch before: each sequence reversed
    _, loss = by_hand.model3(by_hand.model2(by_hand.model1(tokens.flip(-1))), label)
    loss.backward()
    for name, p in by_hand.named_parameters().items():
        torch.testing.assert_close(stepped.named_parameters()[name].grad, p.grad)


@pytest.mark.parametrize(("given", "missing"), [("tokens", "label"), ("label", "tokens")])
def test_previous_step_refuses_half_a_batch_and_says_which_half(given, missing):
    from helpers.language import set_language

    half = {"tokens": TOKENS} if given == "tokens" else {"label": LABEL}
    models = build_models()
    with pytest.raises(TypeError, match=f"given {given} without {missing}: pass both"):
        previous_step(models, **half)
    set_language("zh")
    try:
        with pytest.raises(TypeError, match=f"收到了 {given}，却没有 {missing}"):
            previous_step(models, **half)
    finally:
        set_language("en")
    assert all(p.grad is None for p in models.named_parameters().values())  # before any backward
