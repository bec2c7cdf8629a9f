"""Notebook 09b's exercise checker: one mixed-precision step; right answers written differently
pass, and each usual mistake gets its own message."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from helpers.exercises.nb09b import (
    MISTAKES,
    amp_batches,
    check_amp_step,
    right_step,
)


def loss_of(net, x, y):
    with torch.autocast("cpu", dtype=torch.float16):
        return nn.functional.mse_loss(net(x), y)


def written_differently(net, x, y, opt, scaler, max_norm):
    for p in net.parameters():
        p.grad = None
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        loss = ((net(x) - y) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(list(net.parameters()), max_norm=max_norm)
    scaler.step(opt)
    scaler.update()
    return loss


def backward_twice(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    scaled = scaler.scale(loss_of(net, x, y))
    scaled.backward(retain_graph=True)
    scaled.backward()  # twice: the gradients double, and the clip hides it
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()


def no_scale(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    loss_of(net, x, y).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()


def forgets_backward(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    scaler.scale(loss_of(net, x, y))  # scaled, never backward'd
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()


def no_scale_no_backward(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    loss_of(net, x, y)
    scaler.step(opt)
    scaler.update()


def zero_grad_after_backward(net, x, y, opt, scaler, max_norm):
    scaler.scale(loss_of(net, x, y)).backward()
    opt.zero_grad()  # meant to clear the last step's gradients: clears this one's
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()


def no_update(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    scaler.scale(loss_of(net, x, y)).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)


def unscale_twice(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    scaler.scale(loss_of(net, x, y)).backward()
    scaler.unscale_(opt)
    scaler.unscale_(opt)


def no_unscale(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    scaler.scale(loss_of(net, x, y)).backward()
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()


def bfloat16(net, x, y, opt, scaler, max_norm):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(net(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()


def placeholder(net, x, y, optimizer, scaler, max_norm):
    """As the notebook's cell starts."""
    ...


def said(fn):
    result = check_amp_step(fn)
    return result.ok, " ".join(result.messages)


def test_right_answers_pass_however_written():
    for fn in (right_step, written_differently):
        ok, text = said(fn)
        assert ok, text
    assert check_amp_step(right_step).success.startswith("right: zero, scaled backward")


def test_each_mistake_the_checker_runs_itself_is_named():
    expected = {
        "no_zero_grad": "gradients of the previous step were still in .grad",
        "clip_first": "the clip saw the scaled gradients",
        "no_clip": "norm was above max_norm",
        "optimizer_step": "step with scaler.step(optimizer)",
    }
    assert set(MISTAKES) == set(expected)
    for key, words in expected.items():
        ok, text = said(MISTAKES[key])
        assert not ok and words in text, key


def test_mistakes_gradscaler_refuses_are_explained():
    assert "not from scaler.scale(loss)" in said(no_scale)[1]
    assert "end each step with scaler.update()" in said(no_update)[1]
    assert "ran twice in one step" in said(unscale_twice)[1]
    assert "the clip saw the scaled gradients" in said(no_unscale)[1]  # step unscales after clip


def test_no_gradient_at_the_step_says_why_instead_of_torchs_assertion():
    for step in (forgets_backward, no_scale_no_backward):
        ok, text = said(step)
        assert not ok and "no backward reached the network in amp_step" in text, step.__name__
    ok, text = said(zero_grad_after_backward)
    assert not ok and "backward ran, but .grad was emptied before the step" in text


def test_a_doubled_backward_is_named_though_the_clip_hides_it_in_the_weights():
    assert said(backward_twice) == (False, (
        "backward reached the network 2 times in one step: the gradients added up to 2 times "
        "their size. The clip to max_norm hid it here; without a clip, or under max_norm, the "
        "step would be 2 times too long. Call scaler.scale(loss).backward() once per "
        "step"))  # fmt: skip


def test_other_runs_and_answers_that_are_not_a_step():
    def moves_a_weight_by_hand(net, x, y, opt, scaler, max_norm):
        right_step(net, x, y, opt, scaler, max_norm)
        with torch.no_grad():
            net[0].bias += 0.01  # nothing in the step's calls shows this

    assert said(moves_a_weight_by_hand)[1] == (
        "the weights after step 1 differ from a correct mixed-precision step"
    )
    assert "never moved" in said(lambda *args: None)[1]
    assert "still `...`" in said(placeholder)[1] and "still `...`" in said(...)[1]
    assert said(3)[1] == "amp_step is an int, not a function"
    assert said(lambda *args: 1 / 0)[1].endswith("raised ZeroDivisionError: division by zero")


def test_the_third_batch_overflows_once_scaled():
    batches = amp_batches()
    assert len(batches) == 4 and batches[2][0][0, 0] == 1e5
    assert torch.equal(batches[0][0], batches[3][0])


def test_the_batches_are_seeded_apart_from_the_network():
    from helpers.precision import small_network

    batches = amp_batches()
    _, x, y = small_network()
    other = torch.randn(64, 16, generator=torch.Generator().manual_seed(1))
    assert torch.equal(batches[0][0], x) and torch.equal(batches[1][0], other)
    assert torch.equal(batches[2][0][1:], other[1:]) and torch.equal(batches[1][1], y)


def test_a_run_that_goes_wrong_later_names_the_step():
    calls = []

    def right_then_wrong(net, x, y, opt, scaler, max_norm):
        calls.append(1)
        if len(calls) < 2:
            return right_step(net, x, y, opt, scaler, max_norm)
        right_step(net, x, y, opt, scaler, max_norm)
        with torch.no_grad():  # from step 2 on
            net[0].bias += 0.01

    assert said(right_then_wrong)[1] == (
        "the weights after step 2 differ from a correct mixed-precision step"
    )


def test_an_error_without_a_message_is_named_by_its_type():
    def silent(*args):
        raise ValueError

    assert said(silent)[1] == "amp_step(net, x, y, optimizer, scaler, max_norm) raised ValueError: "


# Wrong answers as learners write them: each gets a message that names what it did.


def test_autocast_left_at_its_cpu_default():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        with torch.autocast("cpu"):
            loss = nn.functional.mse_loss(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    for step in (amp_step, bfloat16):
        assert said(step)[1].startswith(
            'net(x) ran in bfloat16, what torch.autocast("cpu") gives unless dtype= says otherwise'
        ), step.__name__


def test_autocast_for_cuda_on_the_cpu():
    import warnings

    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.mse_loss(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    with warnings.catch_warnings():  # torch warns that CUDA is not there, where it is not
        warnings.simplefilter("ignore")
        assert said(amp_step)[1].startswith(
            "net(x) ran in float32: no float16 autocast was on for the CPU"
        )


def test_the_sum_of_squares_instead_of_their_mean():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = ((net(x) - y) ** 2).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    assert said(amp_step)[1].startswith(
        "the loss given to scaler.scale is 64 times the mean squared error: a sum over the 64"
    )


def test_another_loss():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.l1_loss(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    text = said(amp_step)[1]
    assert text.startswith("the loss given to scaler.scale is ")
    assert "not the mean squared error of net(x) and y" in text


def test_a_loss_a_little_off_is_named_with_both_values_to_four_places():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y) * 1.001).backward()  # 0.1% off: more than a rounding
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    found = re.fullmatch(
        r"the loss given to scaler.scale is (\S+), not the mean squared error of net\(x\) and y "
        r"\((\S+)\): use nn.functional.mse_loss\(net\(x\), y\)",
        said(amp_step)[1],
    )
    value, mse = found.groups()
    assert re.fullmatch(r"\d+\.\d{1,4}", value) and re.fullmatch(r"\d+\.\d{1,4}", mse)
    assert float(value) == pytest.approx(1.001 * float(mse), abs=2e-4)


def test_a_list_given_to_scale_is_not_called_none():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale([loss_of(net, x, y)]).backward()  # scale returns a list for a list

    ok, text = said(amp_step)
    assert not ok and "raised AttributeError: 'list' object has no attribute 'backward'" in text
    assert "given None" not in text


def test_scaler_step_and_optimizer_step_both():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y)).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        optimizer.step()
        scaler.update()

    assert said(amp_step)[1].startswith(
        "the optimizer stepped 2 times in one step: scaler.step(optimizer) already calls"
    )


def test_update_before_step():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y)).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.update()
        scaler.step(optimizer)

    assert said(amp_step)[1].startswith(
        "scaler.update() ran before scaler.step(optimizer): update ends the step"
    )


def test_unscale_after_step():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y)).backward()
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.unscale_(optimizer)
        scaler.update()

    assert said(amp_step)[1] == (
        "scaler.unscale_(optimizer) ran after scaler.step(optimizer): unscale_ comes first, then "
        "the clip, then the step"
    )


def test_the_loss_scaled_twice():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        loss = scaler.scale(loss_of(net, x, y))
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    assert said(amp_step)[1].startswith("scaler.scale ran 2 times in one step")


def test_scale_wrapped_around_backward():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y).backward())
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    assert said(amp_step)[1].startswith(
        "scaler.scale was given None: loss.backward() returns nothing"
    )


def test_the_network_made_float16():
    def amp_step(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        net.half()
        loss = nn.functional.mse_loss(net(x.half()), y.half())
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    text = said(amp_step)[1]
    assert text.startswith("amp_step raised ValueError: Attempting to unscale FP16 gradients.")
    assert "The network's weights are float16 (net.half())" in text


def test_a_clip_that_bounds_elements_or_a_larger_norm():
    def clip_value(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y)).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_value_(net.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

    def clip_to_one(net, x, y, optimizer, scaler, max_norm):
        optimizer.zero_grad()
        scaler.scale(loss_of(net, x, y)).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()

    for step in (clip_value, clip_to_one):
        text = said(step)[1]
        assert "norm was above max_norm, as with no clip at all" in text, step.__name__
        assert "clip_grad_value_ bounds each element, not the norm" in text
