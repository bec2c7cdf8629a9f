"""A step that runs without the doctor runs the same with it: the same parameters after, the same
error when it fails. Each step is written as learners write them (custom Functions, hooks of
every kind, schedulers, gradients set by hand, errors in the forward pass), run twice from the
same seed, once bare and once inside `doctor(model)`."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.doctor import doctor


class ScaleBy(torch.autograd.Function):
    """A learned scale whose backward returns None for the scale: legal, and common."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(k)
        return x * k

    @staticmethod
    def backward(ctx, grad):
        (k,) = ctx.saved_tensors
        return grad * k, None


class Clamp(torch.autograd.Function):
    """A straight-through clamp: saves nothing, passes the gradient on unchanged."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first, self.last = nn.Linear(3, 4), nn.Linear(4, 1)
        self.k = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return self.last(Clamp.apply(ScaleBy.apply(self.first(x), self.k)))


x = torch.tensor([[1.0, 2.0, -1.0], [0.5, -2.0, 1.0]])
target = torch.tensor([[1.0], [-1.0]])


def plain_step(model, optimizer):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()


def with_every_hook(model, optimizer):
    seen = []
    model.first.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    model.first.register_forward_hook(lambda m, args, out: seen.append("fwd"))
    model.last.register_full_backward_pre_hook(lambda m, g: seen.append("bwd-pre"))
    model.last.register_full_backward_hook(lambda m, gi, go: seen.append("bwd"))
    model.last.weight.register_hook(lambda g: g * 0.5)  # a hook that changes the gradient
    model.last.bias.register_post_accumulate_grad_hook(lambda p: seen.append("acc"))
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append("step-pre"))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: seen.append("step"))
    plain_step(model, optimizer)
    return seen


def with_a_scheduler(model, optimizer):
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for _ in range(2):
        plain_step(model, optimizer)
        scheduler.step()
    return scheduler.get_last_lr()


def with_gradients_set_by_hand(model, optimizer):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), target)
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    for parameter, grad in zip(model.parameters(), grads, strict=True):
        parameter.grad = grad
    optimizer.step()


def with_gradients_applied_by_hand(model, optimizer):
    """Functional code: torch.autograd.grad, then an update with what it returns."""
    loss = nn.functional.mse_loss(model(x), target)
    params = [p for p in model.parameters() if p is not model.k]
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for parameter, grad in zip(params, grads, strict=True):
            parameter -= 0.1 * grad


def with_a_mask_of_minus_infinity(model, optimizer):
    """-inf made on purpose from finite values (a mask before a softmax): the doctor looks."""
    optimizer.zero_grad()
    mask = torch.tensor([[False, True, False, True], [True, False, False, False]])
    weights = model.first(x).masked_fill(mask, float("-inf")).softmax(-1)
    nn.functional.mse_loss(model.last(weights), target).backward()
    optimizer.step()


def with_vmap_over_a_layer(model, optimizer):
    """A transform inside the step: values there cannot decide a branch, the doctor's neither."""
    optimizer.zero_grad()
    hidden = torch.func.vmap(lambda sample: model.first(sample).tanh())(x)  # sample by sample
    nn.functional.mse_loss(model.last(hidden), target).backward()
    optimizer.step()


def failing_in_forward(model, optimizer):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x.T), target)  # a shape mistake: (3, 2) into Linear(3, 4)
    loss.backward()


def failing_in_backward(model, optimizer):
    optimizer.zero_grad()
    h = model.first(x).sigmoid()
    out = model.last(h)
    h.mul_(2)  # changes what sigmoid saved
    nn.functional.mse_loss(out, target).backward()


STEPS = [
    plain_step,
    with_every_hook,
    with_a_scheduler,
    with_gradients_set_by_hand,
    with_gradients_applied_by_hand,
    with_a_mask_of_minus_infinity,
    with_vmap_over_a_layer,
]


def run(step, watched: bool):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    outcome = checkup = None
    try:
        if watched:
            with doctor(model) as checkup:
                returned = step(model, optimizer)
        else:
            returned = step(model, optimizer)
    except Exception as err:  # the test compares errors: both runs must fail the same way
        outcome = err
        returned = None
    parameters = {name: p.detach().clone() for name, p in model.named_parameters()}
    return parameters, returned, outcome, checkup


@pytest.mark.parametrize("step", STEPS, ids=lambda step: step.__name__)
def test_a_step_runs_the_same_with_the_doctor(step):
    bare, bare_returned, bare_error, _ = run(step, watched=False)
    watched, watched_returned, watched_error, checkup = run(step, watched=True)
    assert bare_error is None, bare_error
    assert watched_error is None, f"the doctor broke a step that runs without it: {watched_error!r}"
    assert bare_returned == watched_returned
    for name, value in bare.items():
        assert torch.equal(value, watched[name]), name
    assert checkup.cause("first.weight") in ("learned", "accumulated"), checkup


FAILING = [failing_in_forward, failing_in_backward]


@pytest.mark.parametrize("step", FAILING, ids=lambda step: step.__name__)
def test_a_failing_step_fails_the_same_with_the_doctor(step):
    _, _, bare_error, _ = run(step, watched=False)
    _, _, watched_error, _ = run(step, watched=True)
    assert bare_error is not None
    assert type(watched_error) is type(bare_error)
    assert str(watched_error) == str(bare_error)


def test_a_none_gradient_from_a_custom_function_is_named_where_its_backward_is_written():
    _, _, error, checkup = run(plain_step, watched=True)
    assert error is None
    assert checkup.cause("k") == "none_from_function", checkup
    (finding,) = [f for f in checkup.findings if "k" in f.parameters]
    assert "`ScaleByBackward`" in finding.message
    assert checkup.where("k").code == "def backward(ctx, grad):"


def test_nothing_inside_a_custom_functions_forward_is_a_cut():
    _, _, _, checkup = run(plain_step, watched=True)
    assert [f.cause for f in checkup.findings] == ["none_from_function"], checkup
