"""helpers.exercises.nb04: right answers pass, typical wrong answers get the specific hint."""

import warnings

import pytest
import torch

from helpers.exercises.nb04 import (
    EXERCISE_W,
    EXERCISE_X,
    check_autograd_grad,
    check_clip_hook,
    check_retain_grad,
)
from tests.exercises.common import text


def graph():
    """The exercises' graph: W (leaf), x, hidden = W @ x."""
    W = torch.tensor(EXERCISE_W, requires_grad=True)
    x = torch.tensor(EXERCISE_X)
    return W, x, W @ x


def loss_of(hidden):
    return (hidden**2).sum()


# Exercise 1: retain_grad


def test_retain_grad_right_answer_passes():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss_of(hidden).backward()
    result = check_retain_grad(hidden, W, x)
    assert result.ok, result
    assert repr(result) == "✅ hidden.grad = [-2, 6] = 2 * hidden."


def test_retain_grad_placeholder_says_what_to_call():
    W, x, hidden = graph()
    loss_of(hidden).backward()  # the cell with `...` still in place
    result = check_retain_grad(hidden, W, x)
    assert not result.ok
    assert result.messages == [
        "hidden.retains_grad is False: call hidden.retain_grad() before loss.backward() (the "
        "method is retain_grad, not rtain_grad)."
    ]


def test_retain_grad_after_backward_is_named():
    W, x, hidden = graph()
    loss_of(hidden).backward()
    hidden.retain_grad()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == [
        "hidden.retains_grad is True but hidden.grad is None: retain_grad() only affects "
        "backward passes that run after it, so call it before loss.backward()."
    ]


def test_retain_grad_without_any_backward_is_named():
    W, x, hidden = graph()
    hidden.retain_grad()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == ["hidden.grad is None and so is W.grad: did loss.backward() run?"]


def test_retain_grad_twice_backward_is_named():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss = loss_of(hidden)
    loss.backward(retain_graph=True)
    loss.backward()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == [
        "hidden.grad is [-4, 12], twice d loss/d hidden: backward ran twice, and a retained "
        "grad adds up over backward passes like a leaf's .grad."
    ]


def test_retain_grad_detached_hidden_is_named():
    W, x, hidden = graph()
    hidden = hidden.detach().requires_grad_()
    loss_of(hidden).backward()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == [
        "hidden is a leaf, so it is no longer the output of W @ x in the graph (was it detached "
        "or re-created?). Keep hidden = W @ x and call hidden.retain_grad() on it."
    ]


def test_retain_grad_without_backward_is_named():
    W, x, hidden = graph()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == [
        "hidden.retains_grad is False and W.grad is None: call hidden.retain_grad(), then let "
        "loss.backward() run."
    ]


def test_retain_grad_wrong_loss_gives_values():
    W, x, hidden = graph()
    hidden.retain_grad()
    hidden.sum().backward()
    result = check_retain_grad(hidden, W, x)
    assert result.messages == [
        "hidden.grad is [1, 1], expected d loss/d hidden = 2 * hidden = [-2, 6]."
    ]


def test_retain_grad_a_gradient_half_off_is_wrong():
    W, x, hidden = graph()
    hidden.retain_grad()
    (loss_of(hidden) + 0.5 * hidden.sum()).backward()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "hidden.grad is [-1.5, 6.5]" in text(result)


def test_retain_grad_tolerance_is_1e_6_plus_1e_5_relative():
    def with_offset(offset):
        W, x, hidden = graph()
        hidden.retain_grad()
        (loss_of(hidden) + offset * hidden[0]).backward()  # hidden.grad[0] = -2 + offset
        return check_retain_grad(hidden, W, x)

    assert with_offset(2.05e-5).ok  # within 1e-6 + 1e-5 * 2
    assert not with_offset(2.2e-5).ok


def test_retain_grad_tiny_values_are_shown_in_e_notation():
    W, x, hidden = graph()
    hidden.retain_grad()
    (hidden.sum() * 1e-7).backward()
    result = check_retain_grad(hidden, W, x)
    assert "hidden.grad is [1e-07, 1e-07], expected" in text(result)


# Exercise 2: a hook that records and clips


def run_hook(hook):
    W, x, hidden = graph()
    seen = []
    hidden.register_hook(lambda grad: hook(grad, seen))
    loss_of(hidden).backward()
    return hidden, W, x, seen


def test_clip_hook_right_answer_passes():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp(-1, 1)

    result = check_clip_hook(*run_hook(hook))
    assert result.ok, result
    assert repr(result) == "✅ The hook saw [-2, 6] and passed on [-1, 1]."


def test_clip_hook_placeholder_gets_both_hints():
    result = check_clip_hook(*run_hook(lambda grad, seen: None))
    assert not result.ok
    assert result.messages[0] == (
        "seen is empty: the hook should record the gradient it receives, e.g. seen.append(grad)."
    )
    assert "computed from the unclipped gradient" in result.messages[1]


def test_clip_hook_without_backward_says_so():
    W, x, hidden = graph()
    result = check_clip_hook(hidden, W, x, [])
    assert result.messages[1] == "W.grad is None: did loss.backward() run?"


def test_clip_hook_on_a_non_leaf_weight_reads_its_grad_quietly():
    W, x, _ = graph()
    W = W * 1  # not a leaf: reading its .grad warns, and the checker keeps that quiet
    hidden = W @ x
    loss_of(hidden).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = check_clip_hook(hidden, W, x, [])
    assert result.messages[1] == "W.grad is None: did loss.backward() run?"


def test_clip_hook_that_ran_twice():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp(-1, 1)

    W, x, hidden = graph()
    seen = []
    hidden.register_hook(lambda grad: hook(grad, seen))
    loss = loss_of(hidden)
    loss.backward(retain_graph=True)
    loss.backward()
    result = check_clip_hook(hidden, W, x, seen)
    assert result.messages[0] == (
        "the hook ran 2 times: each backward pass calls it once; run backward only once."
    )


def test_clip_hook_that_only_records():
    result = check_clip_hook(*run_hook(lambda grad, seen: seen.append(grad)))
    assert not result.ok and result.messages == [
        "W.grad was computed from the unclipped gradient: the hook must return the clipped "
        "tensor (return grad.clamp(-1, 1)); returning None keeps the gradient."
    ]


def test_clip_hook_in_place_is_named():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp_(-1, 1)  # changes its argument: what seen holds changes too

    result = check_clip_hook(*run_hook(hook))
    assert result.messages == [
        "seen[0] is [-1, 1], already clipped: the hook changed grad in place. Leave its argument "
        "alone and return a new tensor: grad.clamp(-1, 1)."
    ]


def test_clip_hook_that_records_the_clipped_copy_is_not_blamed_for_an_in_place_edit():
    def hook(grad, seen):
        clipped = grad.clamp(-1, 1)
        seen.append(clipped)  # the clipped copy, not what arrived; nothing edited in place
        return clipped

    result = check_clip_hook(*run_hook(hook))
    assert result.messages == [
        "seen[0] is [-1, 1], already clipped: the hook recorded the clipped tensor. Record the "
        "gradient as it arrives, seen.append(grad), then return grad.clamp(-1, 1)."
    ]


def test_clip_hook_wrong_record_is_named():
    def hook(grad, seen):
        seen.append(grad.sum())
        return grad.clamp(-1, 1)

    result = check_clip_hook(*run_hook(hook))
    assert result.messages == [
        "seen[0] should be the gradient flowing into hidden, 2 * hidden = [-2, 6]; got [4]."
    ]


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [(torch.zeros(6), "[0, 0, 0, 0, 0, 0]"), (torch.zeros(7), "a tensor of shape [7]")],
    ids=["6-shown", "7-by-shape"],
)
def test_clip_hook_wrong_record_shows_small_tensors_only(recorded, shown):
    hidden, W, x, _ = run_hook(lambda grad, seen: grad.clamp(-1, 1))
    result = check_clip_hook(hidden, W, x, [recorded])
    assert result.messages == [
        f"seen[0] should be the gradient flowing into hidden, 2 * hidden = [-2, 6]; got {shown}."
    ]


def test_clip_hook_wrong_clip_range_gives_values():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp(-3, 3)

    result = check_clip_hook(*run_hook(hook))
    assert not result.ok and "expected outer(clipped gradient, x)" in text(result)


def test_clip_hook_seen_not_a_list():
    hidden, W, x, _ = run_hook(lambda grad, seen: grad.clamp(-1, 1))
    result = check_clip_hook(hidden, W, x, "nothing")
    assert result.messages == ["seen should be a list, but it is a str."]


# Exercise 3: torch.autograd.grad


def test_autograd_grad_right_answer_passes():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [hidden, W])
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.ok, result
    assert repr(result) == "✅ Both gradients, and W.grad is still None."


def test_autograd_grad_judges_values_in_another_float_dtype():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [hidden, W])
    assert check_autograd_grad([g.double() for g in grads], hidden, W, x).ok


def test_autograd_grad_placeholder():
    W, x, hidden = graph()
    result = check_autograd_grad(..., hidden, W, x)
    assert result.messages == [
        "grads is still `...`: replace it with torch.autograd.grad(loss, [hidden, W])."
    ]


def test_autograd_grad_swapped_inputs():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [W, hidden])
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.messages == [
        "the two gradients are swapped: they come back in the order of the inputs, so ask for "
        "[hidden, W]."
    ]


def test_autograd_grad_one_gradient_right_is_not_called_swapped():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [hidden, hidden])
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.messages == ["grads[1] should be d loss/d W = [-2, -4, 6, 12]."]


def test_autograd_grad_one_input_only():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), hidden)
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.messages == [
        "grads is a tuple of 1; torch.autograd.grad(loss, [hidden, W]) returns a tuple of two "
        "gradients, one per input."
    ]


def test_autograd_grad_a_single_tensor():
    W, x, hidden = graph()
    result = check_autograd_grad(hidden.detach(), hidden, W, x)
    assert result.messages[0].startswith("grads is a Tensor; torch.autograd.grad(")


def test_autograd_grad_after_backward_is_named():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss = loss_of(hidden)
    loss.backward(retain_graph=True)
    grads = torch.autograd.grad(loss, [hidden, W])
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.messages == [
        "W.grad is filled: something called backward(). torch.autograd.grad returns the "
        "gradients and leaves every .grad alone, so no backward() is needed.",
        "hidden.retains_grad is True: torch.autograd.grad needs no retain_grad(); remove that "
        "call.",
    ]


def test_autograd_grad_wrong_values():
    W, x, hidden = graph()
    grads = torch.autograd.grad(hidden.sum(), [hidden, W])
    result = check_autograd_grad(grads, hidden, W, x)
    assert not result.ok
    assert "grads[0] should be" in text(result) and "grads[1] should be" in text(result)


@pytest.mark.parametrize("check", [check_retain_grad, check_clip_hook, check_autograd_grad])
@pytest.mark.parametrize("junk", [..., None, 3, "hidden", torch.ones(3)])
def test_checkers_never_raise(check, junk):
    args = {
        check_retain_grad: (junk, junk, junk),
        check_clip_hook: (junk, junk, junk, junk),
        check_autograd_grad: (junk, junk, junk, junk),
    }[check]
    result = check(*args)
    assert not result.ok and result.messages and "❌ Not yet" in repr(result)


CHECKERS = {
    "retain_grad": lambda hidden, W, x: check_retain_grad(hidden, W, x),
    "clip_hook": lambda hidden, W, x: check_clip_hook(hidden, W, x, []),
    "autograd_grad": lambda hidden, W, x: check_autograd_grad(
        (torch.zeros(2), torch.zeros(2, 2)), hidden, W, x
    ),
}


@pytest.mark.parametrize("check", CHECKERS.values(), ids=CHECKERS.keys())
def test_checkers_name_the_argument_that_is_not_a_tensor_of_its_shape(check):
    W, x, hidden = graph()
    assert check(hidden, 3, x).messages == ["W should be a tensor, but it is an int."]
    assert check(hidden, W, torch.ones(3)).messages == ["x has shape [3], expected [2]."]
    assert check(None, W, x).messages == ["hidden should be a tensor, but it is a NoneType."]


@pytest.mark.parametrize("check", CHECKERS.values(), ids=CHECKERS.keys())
def test_checkers_turn_their_own_failure_into_feedback(check):
    W, x, hidden = graph()
    result = check(hidden, W.int(), x)  # W @ x fails: an int weight with a float input
    assert not result.ok and len(result.messages) == 1
    assert result.messages[0].startswith("Could not check your answer (RuntimeError: ")


def test_checkers_never_raise_on_odd_tensors():
    W, x, hidden = graph()
    seen = [object()]
    result = check_clip_hook(hidden, W, x, seen)
    assert not result.ok and "got a value of type object" in text(result)
    result = check_autograd_grad((torch.ones(5), "w"), hidden, W, x)
    assert not result.ok and "grads[0] should be" in text(result)


def test_clip_hook_right_answer_passes_when_nothing_needs_clipping():
    """Inputs whose gradient is already inside [-1, 1]: clipping changes nothing, and a right
    hook must not be told it forgot to clip."""
    W = torch.tensor([[0.25, 0.0], [0.0, 0.125]], requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    hidden = W @ x
    seen = []

    def hook(grad):
        seen.append(grad)
        return grad.clamp(-1, 1)

    hidden.register_hook(hook)
    loss_of(hidden).backward()
    result = check_clip_hook(hidden, W, x, seen)
    assert result.ok, result


def test_wrong_values_are_shown_beside_the_expected_ones():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp(-3, 3)

    assert check_clip_hook(*run_hook(hook)).messages == [
        "W.grad is [-2, -4, 3, 6], expected outer(clipped gradient, x) = [-1, -2, 1, 2]."
    ]
    W, x, hidden = graph()
    grads = torch.autograd.grad(hidden.sum(), [hidden, W])
    assert check_autograd_grad(grads, hidden, W, x).messages == [
        "grads[0] should be d loss/d hidden = 2 * hidden = [-2, 6].",
        "grads[1] should be d loss/d W = [-2, -4, 6, 12].",
    ]


@pytest.mark.parametrize("check", CHECKERS.values(), ids=CHECKERS.keys())
def test_a_failure_of_the_check_shows_torchs_message(check):
    W, x, hidden = graph()
    with pytest.raises(RuntimeError) as raised:
        W.int() @ x
    assert check(hidden, W.int(), x).messages == [
        f"Could not check your answer (RuntimeError: {raised.value})."
    ]
