"""Checkers of notebook 09: right answers pass, typical wrong answers get a specific message."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.exercises.higher_order import check_checkpointed, check_hvp, check_softsign


def text(result) -> str:
    return " ".join(result.messages)


# check_hvp


def hvp_double_backward(f, x, v):
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (hv,) = torch.autograd.grad(g @ v, x)
    return hv


def test_hvp_by_double_backward_passes():
    result = check_hvp(hvp_double_backward)
    assert result.ok, result


def test_hvp_by_torch_func_and_autograd_functional_pass():
    def by_func(f, x, v):
        _, vjp_fn = torch.func.vjp(torch.func.grad(f), x.detach())
        return vjp_fn(v)[0]

    assert check_hvp(by_func).ok
    assert check_hvp(lambda f, x, v: torch.autograd.functional.hvp(f, x, v)[1]).ok


def test_hvp_without_create_graph_says_so():
    def no_create_graph(f, x, v):
        (g,) = torch.autograd.grad(f(x), x)
        (hv,) = torch.autograd.grad(g @ v, x)
        return hv

    result = check_hvp(no_create_graph)
    assert not result.ok and "create_graph=True" in text(result)


def test_hvp_placeholder_and_tuple():
    assert "returned ...: return H v" in text(check_hvp(lambda f, x, v: ...))
    result = check_hvp(lambda f, x, v: torch.autograd.grad(
        torch.autograd.grad(f(x), x, create_graph=True)[0] @ v, x))
    assert not result.ok and "take its element [0]" in text(result)


def test_hvp_returning_the_gradient_or_ignoring_v():
    def gradient(f, x, v):
        return torch.autograd.grad(f(x), x)[0]

    def ones(f, x, v):
        return hvp_double_backward(f, x, torch.ones_like(v))

    assert "the gradient of f, not H v" in text(check_hvp(gradient))
    assert "v was ignored" in text(check_hvp(ones))


def test_hvp_returning_or_building_the_hessian():
    def hessian(f, x, v):
        return torch.autograd.functional.hessian(f, x)

    def through_hessian(f, x, v):
        return torch.func.jacrev(torch.func.grad(f))(x.detach()) @ v

    assert "that is the Hessian itself" in text(check_hvp(hessian))
    result = check_hvp(through_hessian)
    assert not result.ok and "built the whole matrix with torch.func.jacrev" in text(result)
    assert torch.func.jacrev.__module__ != "helpers.exercises.higher_order"  # put back


def test_hvp_wrong_numbers_and_errors_are_reported():
    result = check_hvp(lambda f, x, v: -hvp_double_backward(f, x, v))
    assert not result.ok and "sign is flipped" in text(result)
    result = check_hvp(lambda f, x, v: 2 * hvp_double_backward(f, x, v))
    assert "H v should be [2.0, -10.0], got [4.0, -20.0]" in text(result)
    assert "ZeroDivisionError" in text(check_hvp(lambda f, x, v: 1 / 0))
    assert "shape (3,)" in text(check_hvp(lambda f, x, v: torch.zeros(3)))


# check_softsign


def softsign_with(backward_rule):
    class Softsign(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return backward_rule(x, grad_output)

    return Softsign


def test_softsign_right_backward_passes():
    result = check_softsign(softsign_with(lambda x, g: g / (1 + x.abs()) ** 2))
    assert result.ok, result
    assert "gradcheck passes" in repr(result)


def test_softsign_typical_mistakes_are_named():
    cases = [
        (lambda x, g: ..., "still returns `...`"),
        (lambda x, g: None, "returned None"),
        (lambda x, g: (g, g), "exactly one gradient"),
        (lambda x, g: g, "straight-through estimator"),
        (lambda x, g: 1 / (1 + x.abs()) ** 2, "ignores grad_output"),
        (lambda x, g: g / (1 + x.abs()), "the square is missing"),
        (lambda x, g: g / (1 + x) ** 2, "use |x|"),
        (lambda x, g: -g / (1 + x.abs()) ** 2, "sign is flipped"),
        (lambda x, g: g * x, "backward should return"),
        (lambda x, g: g[:2], "backward raised RuntimeError"),
    ]
    for rule, message in cases:
        result = check_softsign(softsign_with(rule))
        assert not result.ok and message in text(result), (message, result)


def test_softsign_needs_the_class_and_an_unchanged_forward():
    assert "pass the class itself" in text(check_softsign(lambda x: x))

    class Other(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.tanh()

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    assert "change only backward" in text(check_softsign(Other))


# check_checkpointed


class Block(nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return torch.tanh(self.down(torch.tanh(self.up(x))))


def make_blocks() -> nn.Sequential:
    return nn.Sequential(*[Block() for _ in range(3)])


X = torch.full((2, 4), 0.5)


def check(fn):
    return check_checkpointed(fn, make_blocks, X)


def each_block(use_reentrant=False, **kwargs):
    def fn(blocks, x):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=use_reentrant, **kwargs)
        return x

    return fn


def test_checkpoint_each_block_passes():
    result = check(each_block())
    assert result.ok, result
    assert "Each block ran twice" in repr(result)


def test_checkpoint_the_whole_stack_passes_too():
    result = check(lambda blocks, x: checkpoint(blocks, x, use_reentrant=False))
    assert result.ok, result


def test_checkpoint_placeholder_and_no_checkpoint():
    assert "returned ...: return the last block's output" in text(check(lambda b, x: ...))
    result = check(lambda blocks, x: blocks(x))
    assert not result.ok and "each block ran once: nothing was recomputed" in text(result)


def test_checkpoint_reentrant_without_input_grad_is_explained():
    result = check(each_block(use_reentrant=True))
    assert not result.ok and "has no grad_fn" in text(result)
    assert "use use_reentrant=False" in text(result)


def test_checkpoint_reentrant_with_input_grad_is_named():
    result = check_checkpointed(each_block(use_reentrant=True), make_blocks,
                                X.clone().requires_grad_())
    assert not result.ok and "that is use_reentrant=True" in text(result)


def test_checkpoint_without_use_reentrant_is_caught():
    def no_flag(blocks, x):
        for block in blocks:
            x = checkpoint(block, x)
        return x

    result = check(no_flag)
    assert not result.ok and "pass use_reentrant=False" in text(result)


def test_checkpoint_wrong_computation_and_extra_calls():
    def twice(blocks, x):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False)
            x = block(x)
        return x

    result = check(twice)
    assert not result.ok and "ran 3 times" in text(result)
    assert "differs from the run without checkpointing" in text(result)


def test_checkpoint_errors_and_broken_builders_are_reported():
    assert "ZeroDivisionError" in text(check(lambda blocks, x: 1 / 0))
    result = check_checkpointed(each_block(), lambda: None, X)
    assert not result.ok and "could not run the blocks" in text(result)


def test_checkers_leave_the_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check(each_block())
    check_hvp(hvp_double_backward)
    assert torch.equal(torch.rand(3), expected)
