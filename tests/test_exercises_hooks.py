"""helpers.exercises.hooks: right answers pass, typical wrong answers get the specific hint."""

import pytest
import torch

from helpers.exercises.hooks import (
    EXERCISE_W,
    EXERCISE_X,
    check_autograd_grad,
    check_clip_hook,
    check_retain_grad,
)


def graph():
    """The exercises' graph: W (leaf), x, hidden = W @ x."""
    W = torch.tensor(EXERCISE_W, requires_grad=True)
    x = torch.tensor(EXERCISE_X)
    return W, x, W @ x


def loss_of(hidden):
    return (hidden**2).sum()


def text(result):
    return "\n".join(result.messages)


# Exercise 1: retain_grad


def test_retain_grad_right_answer_passes():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss_of(hidden).backward()
    result = check_retain_grad(hidden, W, x)
    assert result.ok, result
    assert "[-2, 6]" in repr(result)


def test_retain_grad_placeholder_says_what_to_call():
    W, x, hidden = graph()
    loss_of(hidden).backward()  # the cell with `...` still in place
    result = check_retain_grad(hidden, W, x)
    assert not result.ok
    assert "call hidden.retain_grad() before loss.backward()" in text(result)


def test_retain_grad_after_backward_is_named():
    W, x, hidden = graph()
    loss_of(hidden).backward()
    hidden.retain_grad()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "retains_grad is True but hidden.grad is None" in text(result)


def test_retain_grad_twice_backward_is_named():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss = loss_of(hidden)
    loss.backward(retain_graph=True)
    loss.backward()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "backward ran twice" in text(result)


def test_retain_grad_detached_hidden_is_named():
    W, x, hidden = graph()
    hidden = hidden.detach().requires_grad_()
    loss_of(hidden).backward()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "hidden is a leaf" in text(result)


def test_retain_grad_without_backward_is_named():
    W, x, hidden = graph()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "W.grad is None" in text(result)


def test_retain_grad_wrong_loss_gives_values():
    W, x, hidden = graph()
    hidden.retain_grad()
    hidden.sum().backward()
    result = check_retain_grad(hidden, W, x)
    assert not result.ok and "expected d loss/d hidden = 2 * hidden = [-2, 6]" in text(result)


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
    assert "saw [-2, 6] and passed on [-1, 1]" in repr(result)


def test_clip_hook_placeholder_gets_both_hints():
    result = check_clip_hook(*run_hook(lambda grad, seen: None))
    assert not result.ok
    assert "seen is empty" in text(result)
    assert "computed from the unclipped gradient" in text(result)


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
    assert not result.ok and "already clipped" in text(result)


def test_clip_hook_wrong_record_is_named():
    def hook(grad, seen):
        seen.append(grad.sum())
        return grad.clamp(-1, 1)

    result = check_clip_hook(*run_hook(hook))
    assert not result.ok and "seen[0] should be the gradient flowing into hidden" in text(result)


def test_clip_hook_wrong_clip_range_gives_values():
    def hook(grad, seen):
        seen.append(grad)
        return grad.clamp(-3, 3)

    result = check_clip_hook(*run_hook(hook))
    assert not result.ok and "expected outer(clipped gradient, x)" in text(result)


def test_clip_hook_seen_not_a_list():
    hidden, W, x, _ = run_hook(lambda grad, seen: grad.clamp(-1, 1))
    result = check_clip_hook(hidden, W, x, "nothing")
    assert not result.ok and "seen should be a list" in text(result)


# Exercise 3: torch.autograd.grad


def test_autograd_grad_right_answer_passes():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [hidden, W])
    result = check_autograd_grad(grads, hidden, W, x)
    assert result.ok, result


def test_autograd_grad_placeholder():
    W, x, hidden = graph()
    result = check_autograd_grad(..., hidden, W, x)
    assert not result.ok and "grads is still `...`" in text(result)


def test_autograd_grad_swapped_inputs():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), [W, hidden])
    result = check_autograd_grad(grads, hidden, W, x)
    assert not result.ok and "swapped" in text(result)


def test_autograd_grad_one_input_only():
    W, x, hidden = graph()
    grads = torch.autograd.grad(loss_of(hidden), hidden)
    result = check_autograd_grad(grads, hidden, W, x)
    assert not result.ok and "tuple of 1" in text(result)


def test_autograd_grad_after_backward_is_named():
    W, x, hidden = graph()
    hidden.retain_grad()
    loss = loss_of(hidden)
    loss.backward(retain_graph=True)
    grads = torch.autograd.grad(loss, [hidden, W])
    result = check_autograd_grad(grads, hidden, W, x)
    assert not result.ok
    assert "W.grad is filled" in text(result) and "needs no retain_grad()" in text(result)


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


def test_checkers_never_raise_on_odd_tensors():
    W, x, hidden = graph()
    seen = [object()]
    result = check_clip_hook(hidden, W, x, seen)
    assert not result.ok and "got a value of type object" in text(result)
    result = check_autograd_grad((torch.ones(5), "w"), hidden, W, x)
    assert not result.ok and "grads[0] should be" in text(result)
