"""Checkers of notebook 09: right answers pass, typical wrong answers get a specific message."""

import contextlib
import warnings

import pytest
import torch
from torch import nn
from torch.func import hessian as imported_hessian  # bound before a checker can watch it
from torch.utils.checkpoint import checkpoint

from helpers.exercises.nb09 import check_checkpointed, check_hvp, check_softsign
from tests.exercises.common import text

# check_hvp


def hvp_double_backward(f, x, v):
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (hv,) = torch.autograd.grad(g @ v, x)
    return hv


def test_hvp_by_double_backward_passes():
    result = check_hvp(hvp_double_backward)
    assert result.ok, result
    assert repr(result) == "✅ Right: H v from two backward passes, no n×n matrix built."


def test_hvp_is_judged_to_a_relative_1e_7_in_any_float_dtype():
    assert check_hvp(lambda f, x, v: hvp_double_backward(f, x, v) * (1 + 1e-8)).ok
    assert not check_hvp(lambda f, x, v: hvp_double_backward(f, x, v) * (1 + 1e-6)).ok
    assert check_hvp(lambda f, x, v: hvp_double_backward(f, x, v).float()).ok


WHERE = "for f = x0² x1 + x1³ at x = [1.0, 2.0], v = [1.0, -1.0]"


def raises_without_a_message(*_):
    raise ValueError()


def raises_at_length(*_):
    raise ValueError("x" * 200)


@pytest.mark.parametrize(
    ("hvp", "message"),
    [
        (lambda f, x, v: None, "hvp returned None: return H v"),
        (lambda f, x, v: 2.0, "hvp returned a float, not a tensor"),
        (lambda f, x, v: torch.zeros(1), "hvp returned shape [1]; H v has x's shape [2]"),
        (
            lambda f, x, v: (hvp_double_backward(f, x, v),),
            "hvp returned a tuple: torch.autograd.grad returns one gradient per input, take its "
            "element [0]",
        ),
        (
            lambda f, x, v: torch.autograd.functional.hessian(f, x),
            "hvp returned a 2×2 matrix: that is the Hessian itself; return H v, a vector with "
            "x's shape",
        ),
        (
            lambda f, x, v: torch.autograd.grad(f(x), x)[0],
            f"{WHERE} you returned the gradient of f, not H v: differentiate the dot product "
            "(gradient · v) once more, which needs create_graph=True in the first grad call",
        ),
        (
            lambda f, x, v: hvp_double_backward(f, x, torch.ones_like(v)),
            f"{WHERE} you returned H times a vector of ones: v was ignored",
        ),
        (
            lambda f, x, v: -hvp_double_backward(f, x, v),
            f"{WHERE} the sign is flipped: expected [2.0, -10.0], got [-2.0, 10.0]",
        ),
        (
            lambda f, x, v: hvp_double_backward(f, x, v) * 1.000123,  # shown to 4 decimals
            f"{WHERE} H v should be [2.0, -10.0], got [2.0002, -10.0012]",
        ),
        (lambda f, x, v: 1 / 0, "hvp raised ZeroDivisionError: division by zero"),
        (raises_without_a_message, "hvp raised ValueError: "),
        (raises_at_length, "hvp raised ValueError: " + "x" * 160),
    ],
    ids=[
        "none",
        "float",
        "shape",
        "tuple",
        "hessian",
        "gradient",
        "ones",
        "sign",
        "values",
        "error",
        "empty-error",
        "long-error",
    ],
)
def test_hvp_messages_in_full(hvp, message):
    assert check_hvp(hvp).messages == [message]


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
    assert result.messages == [
        "hvp raised RuntimeError: element 0 of tensors does not require grad and does not have a "
        "grad_fn (the gradient you differentiated a second time has no graph: pass "
        "create_graph=True to the first torch.autograd.grad call)"
    ]


def test_hvp_placeholder_and_tuple():
    assert "returned ...: return H v" in text(check_hvp(lambda f, x, v: ...))
    result = check_hvp(
        lambda f, x, v: torch.autograd.grad(
            torch.autograd.grad(f(x), x, create_graph=True)[0] @ v, x
        )
    )
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
    assert result.messages == [
        "the numbers are right, but you built the whole matrix with torch.func.jacrev: an "
        "n-dimensional x costs n backward passes and n² numbers. Two grad calls give H v at the "
        "cost of about one more backward pass"
    ]
    assert torch.func.jacrev.__module__ != "helpers.exercises.nb09"  # put back


@contextlib.contextmanager
def _torch_func_first_use():
    """torch.func's first use in a process may warn that torch.jit.script is deprecated: a
    DeprecationWarning before torch 2.15, a FutureWarning from 2.15 (seen on 2.15.0). pytest makes
    warnings errors; a learner only sees the line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
        yield


def test_hvp_building_the_hessian_however_written_is_caught():
    """Row by row (a stack of n gradients), or by a transform bound to a name before the checker
    could watch it: each makes an n×n tensor, and that is what the checker looks for."""

    def rows(f, x, v):
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.stack([torch.autograd.grad(gi, x, retain_graph=True)[0] for gi in g]) @ v

    def imported(f, x, v):
        return imported_hessian(f)(x.detach()) @ v

    with _torch_func_first_use():
        imported_result, rows_result = check_hvp(imported), check_hvp(rows)
    assert rows_result.messages == [
        "the numbers are right, but a 4×4 tensor was made along the way (the first one by "
        "torch.stack): that is the whole Hessian, n backward passes and n² numbers. Two grad "
        "calls give H v without it, at the cost of about one more backward pass"
    ]
    assert not imported_result.ok
    assert "a 4×4 tensor was made along the way" in text(imported_result)


def test_hvp_forward_over_reverse_and_vhp_pass():
    def forward_over_reverse(f, x, v):
        return torch.func.jvp(torch.func.grad(f), (x.detach(),), (v,))[1]

    with _torch_func_first_use():
        assert check_hvp(forward_over_reverse).ok
        assert check_hvp(lambda f, x, v: torch.autograd.functional.vhp(f, x, v)[1]).ok


def test_hvp_wrong_numbers_and_errors_are_reported():
    result = check_hvp(lambda f, x, v: -hvp_double_backward(f, x, v))
    assert not result.ok and "sign is flipped" in text(result)
    result = check_hvp(lambda f, x, v: 2 * hvp_double_backward(f, x, v))
    assert "H v should be [2.0, -10.0], got [4.0, -20.0]" in text(result)
    assert "ZeroDivisionError" in text(check_hvp(lambda f, x, v: 1 / 0))
    assert "shape [3]" in text(check_hvp(lambda f, x, v: torch.zeros(3)))


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
    assert repr(result) == "✅ gradcheck passes: backward is the derivative of forward."


SOFTSIGN_MESSAGES = [
    (lambda x, g: ..., "backward still returns `...`: return the gradient for x"),
    (lambda x, g: None, "backward returned None: x gets no gradient at all"),
    (lambda x, g: (g, g), "backward must return exactly one gradient: forward has one input"),
    (
        lambda x, g: g,
        "backward passes grad_output through unchanged (a straight-through estimator): multiply "
        "it by the derivative 1 / (1 + |x|)²",
    ),
    (
        lambda x, g: 1 / (1 + x.abs()) ** 2,
        "backward ignores grad_output: the chain rule multiplies the incoming gradient by the "
        "local derivative",
    ),
    (
        lambda x, g: g / (1 + x.abs()),
        "the square is missing: d/dx x / (1 + |x|) = 1 / (1 + |x|)²",
    ),
    (lambda x, g: g / (1 + x) ** 2, "use |x|: for negative x the derivative is 1 / (1 - x)²"),
    (lambda x, g: -g / (1 + x.abs()) ** 2, "the sign is flipped: softsign increases everywhere"),
    (
        lambda x, g: g * (x / (1 + x.abs())) ** 2,
        "that is the output squared; the derivative is 1 / (1 + |x|)², computed from the input x",
    ),
    (
        lambda x, g: g * x,
        "with grad_output [1.0, 2.0, -1.0, 0.5] at x = [-2.0, -0.5, 0.25, 1.5] backward should "
        "return [0.1111, 0.8889, -0.64, 0.08], got [-2.0, -1.0, -0.25, 0.75]",
    ),
    (
        # right for the checker's grad_output only: gradcheck's other grad_outputs catch it
        lambda x, g: torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=x.dtype) / (1 + x.abs()) ** 2,
        "backward is right on the test points, but gradcheck fails on them",
    ),
]


@pytest.mark.parametrize(("rule", "message"), SOFTSIGN_MESSAGES)
def test_softsign_messages_in_full(rule, message):
    assert check_softsign(softsign_with(rule)).messages == [message]


def test_softsign_forward_that_raises_is_reported():
    class Raises(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            raise ValueError("nope")

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    assert check_softsign(Raises).messages == ["the forward raised ValueError: nope"]


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
    assert check_softsign(lambda x: x).messages == [
        "pass the class itself (a torch.autograd.Function), got function"
    ]

    class Other(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.tanh()

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    assert check_softsign(Other).messages == [
        "the forward no longer computes x / (1 + |x|): change only backward"
    ]


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
    assert repr(result) == (
        "✅ Each block ran twice, the graph saved 64 instead of 480 bytes of activations, and "
        "every gradient equals the plain run's."
    )


def test_checkpoint_other_warnings_are_not_about_use_reentrant():
    def warns(blocks, x):
        warnings.warn("something else", stacklevel=1)
        return each_block()(blocks, x)

    assert check(warns).ok


def raises_about_use_reentrant(blocks, x):
    raise ValueError("use_reentrant must be passed")


def detaches_after_the_first_block(blocks, x):
    for k, block in enumerate(blocks):
        x = checkpoint(block, x, use_reentrant=False)
        if k == 0:
            x = x.detach()
    return x


def runs_each_block_under_no_grad_first(blocks, x):
    with torch.no_grad():
        blocks(x)  # recomputing by hand saves nothing: the second run records everything
    return blocks(x)


def under_no_grad(blocks, x):
    with torch.no_grad():
        return blocks(x)


NOT_CHECKPOINTED = (
    "each block ran once: nothing was recomputed, so nothing was checkpointed. Wrap each block: "
    "h = checkpoint(block, h, use_reentrant=False)"
)
DIFFERS = (
    "0.up.weight.grad differs from the run without checkpointing: the checkpointed blocks must "
    "compute exactly what the plain ones do"
)


@pytest.mark.parametrize(
    ("fn", "messages"),
    [
        (lambda blocks, x: None, ["your function returned None: return the last block's output"]),
        (lambda blocks, x: [x], ["your function returned a list, not a tensor"]),
        (lambda blocks, x: blocks(x), [NOT_CHECKPOINTED]),
        (lambda blocks, x: 1 / 0, ["your function raised ZeroDivisionError: division by zero"]),
        (
            raises_about_use_reentrant,
            [
                "your function raised ValueError: use_reentrant must be passed (pass "
                "use_reentrant=False explicitly)"
            ],
        ),
        (
            under_no_grad,
            [
                "the output has no grad_fn, so no gradient can flow: was it computed under "
                "torch.no_grad()?"
            ],
        ),
        (
            each_block(use_reentrant=True),
            [
                "the output has no grad_fn, so no gradient can flow: checkpoint(..., "
                "use_reentrant=True) with an input that does not require grad returns a result "
                "without history: use use_reentrant=False"
            ],
        ),
        (
            detaches_after_the_first_block,
            [
                "block 0 ran 1 times; a checkpointed block runs twice: once forward, once again in "
                "backward (call each block once in your function)",
                "0.up.weight got no gradient",
            ],
        ),
        (lambda blocks, x: each_block()(blocks, x) * 1.01, [DIFFERS]),
        (
            runs_each_block_under_no_grad_first,
            ["the graph saved 480 bytes of activations, no fewer than without checkpointing (480)"],
        ),
    ],
    ids=[
        "none",
        "list",
        "plain",
        "error",
        "error-use-reentrant",
        "no-grad",
        "reentrant",
        "detached",
        "scaled",
        "by-hand",
    ],
)
def test_checkpoint_messages_in_full(fn, messages):
    assert check(fn).messages == messages


def test_checkpoint_the_whole_stack_passes_too():
    result = check(lambda blocks, x: checkpoint(blocks, x, use_reentrant=False))
    assert result.ok, result


def test_checkpoint_placeholder_and_no_checkpoint():
    assert "returned ...: return the last block's output" in text(check(lambda b, x: ...))
    result = check(lambda blocks, x: blocks(x))
    assert not result.ok and "each block ran once: nothing was recomputed" in text(result)


def test_checkpoint_whose_results_are_dropped_is_told_so_not_asked_about_no_grad():
    def forgets_the_assignment(blocks, x):
        for block in blocks:
            checkpoint(block, x, use_reentrant=False)  # x = forgotten
        return x

    assert check(forgets_the_assignment).messages == [
        "the function returned x itself, as it came in: the blocks' results were dropped. Keep "
        "each one: x = checkpoint(block, x, use_reentrant=False)"
    ]


def test_checkpoint_reentrant_without_input_grad_is_explained():
    result = check(each_block(use_reentrant=True))
    assert not result.ok and "has no grad_fn" in text(result)
    assert "use use_reentrant=False" in text(result)


def test_checkpoint_reentrant_with_input_grad_is_named():
    result = check_checkpointed(
        each_block(use_reentrant=True), make_blocks, X.clone().requires_grad_()
    )
    assert result.messages == [
        "the output's grad_fn is CheckpointFunctionBackward: that is use_reentrant=True; pass "
        "use_reentrant=False"
    ]


def test_checkpoint_without_use_reentrant_is_caught():
    def no_flag(blocks, x):
        for block in blocks:
            x = checkpoint(block, x)
        return x

    result = check(no_flag)
    assert result.messages[0] == (
        "torch warned that use_reentrant should be passed explicitly: pass use_reentrant=False "
        "(the default is still the older reentrant variant)"
    )


def test_checkpoint_wrong_computation_and_extra_calls():
    def twice(blocks, x):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False)
            x = block(x)
        return x

    result = check(twice)
    assert result.messages == [
        "block 0 ran 3 times, block 1 ran 3 times, block 2 ran 3 times; a checkpointed block "
        "runs twice: once forward, once again in backward (call each block once in your "
        "function)",
        DIFFERS,
    ]


def test_checkpoint_errors_and_broken_builders_are_reported():
    assert "ZeroDivisionError" in text(check(lambda blocks, x: 1 / 0))
    result = check_checkpointed(each_block(), lambda: None, X)
    assert not result.ok and "could not run the blocks" in text(result)
    result = check_checkpointed(each_block(), make_blocks, torch.ones(2, 3))  # the wrong width
    [message] = result.messages  # torch 2.15 prefixes its text with "addmm: "
    assert message.startswith("could not run the blocks without checkpointing: RuntimeError: ")
    assert message.endswith("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x16)")


def test_checkers_leave_the_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check(each_block())
    check_hvp(hvp_double_backward)
    assert torch.equal(torch.rand(3), expected)


class SavedTuple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / (1 + x.abs())

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.saved_tensors  # a tuple: (x,) = ... was meant
        return grad_output / (1 + x.abs()) ** 2


def test_softsign_saved_tensors_not_unpacked_is_named():
    assert check_softsign(SavedTuple).messages == [
        "backward raised AttributeError: 'tuple' object has no attribute 'abs'. "
        "ctx.saved_tensors is a tuple, even with one tensor in it: unpack it, "
        "(x,) = ctx.saved_tensors"
    ]
