"""Notebook 07b's exercise checkers: a stage's backward split as zero-bubble schedules split it,
and data parallelism's average written as a hook (checked on two real ranks)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from helpers.exercises.nb07b import (
    average_hook_rank,
    check_average_hook,
    check_input_then_weights,
    stage_case,
)
from tests.ranks.rank_threads import run_in_threads, threads_available


def right(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
    return input_grad, lambda: output.backward(grad, inputs=list(weights))


def right_with_backward_inputs(output, grad, received, weights):
    output.backward(grad, inputs=[received], retain_graph=True)
    return received.grad.clone(), lambda: output.backward(grad, inputs=list(weights))


def full_backward_first(output, grad, received, weights):
    output.backward(grad)
    return received.grad, lambda: None


def graph_freed(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad)
    return input_grad, lambda: output.backward(grad, inputs=list(weights))


def grad_only(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
    return input_grad, lambda: torch.autograd.grad(output, list(weights), grad)


def input_again(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
    return input_grad, lambda: output.backward(grad)


def right_adding_by_hand(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)

    def finish():
        for p, g in zip(weights, torch.autograd.grad(output, list(weights), grad), strict=True):
            p.grad = g if p.grad is None else p.grad + g

    return input_grad, finish


def finish_replaces(output, grad, received, weights):
    (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)

    def finish():
        for p, g in zip(weights, torch.autograd.grad(output, list(weights), grad), strict=True):
            p.grad = g  # the micro-batch before is lost

    return input_grad, finish


def sends_back_what_arrived(output, grad, received, weights):
    return grad, lambda: output.backward(grad, inputs=list(weights))


def messages(fn):
    result = check_input_then_weights(fn)
    return result.ok, " ".join(result.messages)


def test_right_answers_pass_however_written():
    for fn in (right, right_with_backward_inputs, right_adding_by_hand):
        ok, said = messages(fn)
        assert ok, said


def test_each_typical_mistake_gets_its_own_message():
    assert "first part ran the full backward" in messages(full_backward_first)[1]
    assert messages(graph_freed)[1] == (
        "finish() raised: the first part's backward freed the tensors the graph saved. Keep them "
        "for the second with retain_graph=True"
    )
    assert "writes no .grad" in messages(grad_only)[1]
    assert "inputs=weights" in messages(input_again)[1]
    assert "the gradient that arrived" in messages(sends_back_what_arrived)[1]
    assert messages(finish_replaces) == (False, (
        "finish() replaced the weights' .grad instead of adding to it: a pipeline runs it once "
        "per micro-batch into the same .grad, and an earlier micro-batch's gradient was lost. "
        "Let backward accumulate (output.backward(grad, inputs=weights)), or add: "
        "p.grad += g"))  # fmt: skip
    assert not any(messages(f)[0] for f in (full_backward_first, graph_freed, grad_only))


def test_placeholders_and_wrong_shapes_of_answer():
    assert "still `...`" in messages(...)[1]
    assert "an int, not a function" in messages(3)[1]
    assert "returned nothing" in messages(lambda *a: ...)[1]
    assert "return a pair" in messages(lambda *a: [1, 2])[1]
    assert "raised ZeroDivisionError" in messages(lambda *a: 1 / 0)[1]
    ok, said = messages(lambda o, g, r, w: (right(o, g, r, w)[0], 5))
    assert not ok and "an int: return a function finish()" in said
    ok, said = messages(lambda o, g, r, w: (right(o, g, r, w)[0], lambda: 1 / 0))
    assert "finish() raised ZeroDivisionError" in said


def test_the_cases_are_seeded_and_differ():
    a, b = stage_case(0), stage_case(1)
    assert torch.equal(stage_case(0)[1], a[1]) and not torch.equal(a[1], b[1])


def test_every_other_way_to_fail_gets_its_message():
    def other_error(output, grad, received, weights):
        def finish():
            raise RuntimeError("boom")

        return right(output, grad, received, weights)[0], finish

    def wrong_weights(output, grad, received, weights):
        (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
        return input_grad, lambda: output.backward(2 * grad, inputs=list(weights))

    def zeros(output, grad, received, weights):
        return torch.zeros_like(received), lambda: output.backward(grad, inputs=list(weights))

    def nearly(output, grad, received, weights):
        good, finish = right(output, grad, received, weights)
        return good + 1e-3, finish

    assert messages(other_error)[1] == "finish() raised RuntimeError: boom"
    assert messages(wrong_weights)[1] == (
        "after finish() the weights' .grad differ from a full output.backward(grad)"
    )
    assert messages(zeros)[1] == (
        "input_grad is not the gradient of received that a full output.backward(grad) gives"
    )
    assert not messages(nearly)[0]
    assert messages(lambda *a: [1, 2])[1] == (
        "input_then_weights returned a list: return a pair (input_grad, finish)"
    )
    assert messages(lambda *a: 1 / 0)[1] == (
        "input_then_weights(output, grad, received, weights) raised ZeroDivisionError: "
        "division by zero"
    )
    assert messages(lambda *a: (torch.zeros(1), None))[1].startswith("input_grad is not")


def test_both_cases_are_checked_with_their_own_seeded_tensors():
    seen = []

    def spy(output, grad, received, weights):
        seen.append(received.detach().clone())
        return right(output, grad, received, weights)

    result = check_input_then_weights(spy)
    assert result.ok and result.success.startswith("right: the input's gradient first")
    assert len(seen) == 2
    for seed, tensor in enumerate(seen):
        gen = torch.Generator().manual_seed(seed)
        torch.testing.assert_close(tensor, torch.randn(4, 6, generator=gen))
    stage, _, grad = stage_case(0)
    assert [type(m).__name__ for m in stage] == ["Linear", "Tanh", "Linear"]
    gen = torch.Generator().manual_seed(0)
    torch.randn(4, 6, generator=gen)
    torch.testing.assert_close(grad, torch.randn(4, 6, generator=gen))


def test_an_error_without_a_message_is_named_by_its_type():
    def silent(*args):
        raise ValueError

    assert messages(silent)[1] == (
        "input_then_weights(output, grad, received, weights) raised ValueError: "
    )


# The second exercise: data parallelism's average as a post-accumulate-grad hook, on two ranks.


def average(p):
    dist.all_reduce(p.grad)
    p.grad /= dist.get_world_size()


def average_divided_first(param):
    param.grad = param.grad / dist.get_world_size()
    dist.all_reduce(param.grad)


def two_written(p):
    dist.all_reduce(p.grad)
    p.grad /= 2  # right on the checker's two ranks only


def two_written_in_other_ways(p):
    dist.all_reduce(p.grad)
    p.grad.mul_(0.5)


def two_written_first(p):
    p.grad = p.grad / 2
    dist.all_reduce(p.grad)


def summed(p):
    dist.all_reduce(p.grad)


def halved_only(p):
    p.grad /= 2


def reduced_a_copy(p):
    dist.all_reduce(p.grad / dist.get_world_size())


def reduced_the_weights(p):
    dist.all_reduce(p.data)
    p.data /= dist.get_world_size()


def moves_the_weights(p):
    dist.all_reduce(p.grad)
    p.grad /= 2
    p.data -= 0.1 * p.grad


def uses_a_notebook_name(p):
    dist.all_reduce(p.grad)
    p.grad /= WORLD  # noqa: F821 - a name the ranks do not have


def only_rank_0_reduces(p):
    if dist.get_rank() == 0:
        dist.all_reduce(p.grad)


def raises(p):
    raise ValueError("no")


def placeholder(p):
    """The notebook's cell as the learner finds it."""
    ...


def wrong_factor(p):
    dist.all_reduce(p.grad)
    p.grad /= 3


def hook_messages(fn):
    result = check_average_hook(fn)
    return result.ok, " ".join(result.messages)


def test_right_averages_pass_however_written():
    for fn in (average, average_divided_first):
        ok, said = hook_messages(fn)
        assert ok, said
    assert check_average_hook(average).success.startswith("right: each gradient is averaged")


def test_each_typical_averaging_mistake_gets_its_own_message():
    assert hook_messages(summed) == (False, (
        "every rank holds twice the batch's gradient: all_reduce sums over the ranks; divide "
        "by their number, dist.get_world_size()"))  # fmt: skip
    assert hook_messages(halved_only)[1] == (
        "each rank still holds the gradient of its own half: dist.all_reduce(p.grad) combines them"
    )
    assert (
        "all_reduce(p.grad / dist.get_world_size()) reduced a new tensor"
        in (hook_messages(reduced_a_copy)[1])
    )
    assert "went to the parameter, not to its gradient" in hook_messages(reduced_the_weights)[1]
    assert hook_messages(moves_the_weights)[1] == (
        "a weight changed during backward: reduce the gradient p.grad, not the parameter p"
    )
    assert hook_messages(wrong_factor)[1].startswith("after backward the ranks' p.grad is not")
    for fn in (two_written, two_written_in_other_ways, two_written_first):
        assert hook_messages(fn) == (False, (
            "right on these 2 ranks, but average divides by the number 2 written in its code: "
            "on any other number of ranks it is wrong. Divide by "
            "dist.get_world_size()"))  # fmt: skip


def test_a_failing_or_waiting_rank_is_explained():
    ok, said = hook_messages(uses_a_notebook_name)
    assert not ok and said.startswith("average(p) raised NameError: name 'WORLD' is not defined.")
    assert "nothing else defined in the notebook" in said
    assert hook_messages(raises)[1] == "average(p) raised on a rank: ValueError: no"
    assert hook_messages(only_rank_0_reduces)[1].startswith("a rank stopped answering inside")


def test_what_is_not_a_def_is_refused_before_any_rank_starts():
    assert "still `...`" in hook_messages(placeholder)[1]
    assert "still `...`" in hook_messages(...)[1]
    assert hook_messages(3)[1] == "average is an int, not a function"
    assert "with def in a cell" in hook_messages(lambda p: None)[1]
    assert "with def in a cell" in hook_messages(print)[1]


@pytest.mark.skipif(not threads_available(), reason="the processes above run the same code")
def test_each_rank_runs_the_hook_on_every_parameter_of_its_half():
    import inspect

    from helpers.ranks.data_parallel_ranks import full_batch_grads, half_batch

    kwargs = {"source": inspect.getsource(average), "name": "average"}
    ranks = run_in_threads(average_hook_rank, 2, kwargs=kwargs)
    full = full_batch_grads()
    for rank in (0, 1):
        assert ranks[rank]["weights changed"] is False
        assert ranks[rank]["grads"].keys() == full.keys()
        for name, g in full.items():
            torch.testing.assert_close(ranks[rank]["grads"][name], g)
    moved = run_in_threads(average_hook_rank, 2, kwargs={
        "source": inspect.getsource(moves_the_weights), "name": "moves_the_weights"})  # fmt: skip
    assert moved[0]["weights changed"] is True
    assert not torch.equal(half_batch(0)[0], half_batch(1)[0])


# Wrong answers as learners write them: each gets a message that names what it did.


def test_everything_computed_first_and_only_stored_in_finish_fails():
    def input_then_weights(output, grad, received, weights):
        grads = torch.autograd.grad(output, [received, *weights], grad)

        def finish():
            for p, g in zip(weights, grads[1:], strict=True):
                p.grad = g if p.grad is None else p.grad + g

        return grads[0], finish

    ok, said = messages(input_then_weights)
    assert not ok
    assert said.startswith("the first part computed the weights' gradients too, and finish() only")


def test_the_weights_first_and_the_input_in_finish():
    def input_then_weights(output, grad, received, weights):
        output.backward(grad, inputs=list(weights), retain_graph=True)
        return received.grad, lambda: output.backward(grad, inputs=[received])

    assert messages(input_then_weights)[1].startswith(
        "the first part computed the weights' gradients and not received's"
    )


def test_received_grad_read_after_autograd_grad():
    def input_then_weights(output, grad, received, weights):
        torch.autograd.grad(output, received, grad, retain_graph=True)
        return received.grad, lambda: output.backward(grad, inputs=list(weights))

    assert messages(input_then_weights)[1].startswith(
        "input_grad is None: return the gradient itself. torch.autograd.grad returns it"
    )


def test_the_tuple_from_autograd_grad_not_unpacked():
    def input_then_weights(output, grad, received, weights):
        input_grad = torch.autograd.grad(output, received, grad, retain_graph=True)
        return input_grad, lambda: output.backward(grad, inputs=list(weights))

    assert messages(input_then_weights)[1] == (
        "input_grad is a tuple holding the gradient: torch.autograd.grad returns one gradient per "
        "input, in a tuple. Unpack it: (input_grad,) = torch.autograd.grad(...)"
    )


def test_the_pair_returned_the_other_way_round():
    def input_then_weights(output, grad, received, weights):
        (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
        return (lambda: output.backward(grad, inputs=list(weights))), input_grad

    assert messages(input_then_weights)[1] == (
        "the pair is the other way round (finish first): return (input_grad, finish)"
    )


def test_the_input_gradient_with_the_wrong_sign():
    def input_then_weights(output, grad, received, weights):
        (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
        return -input_grad, lambda: output.backward(grad, inputs=list(weights))

    assert messages(input_then_weights)[1].startswith(
        "input_grad is minus the gradient of received"
    )


def test_the_input_gradient_from_output_sum():
    def input_then_weights(output, grad, received, weights):
        (input_grad,) = torch.autograd.grad(output.sum(), received, retain_graph=True)
        return input_grad, lambda: output.backward(grad, inputs=list(weights))

    assert messages(input_then_weights)[1].startswith(
        "input_grad is received's gradient for a gradient of ones at the output"
    )


def test_the_weights_gradients_from_output_sum():
    def input_then_weights(output, grad, received, weights):
        (input_grad,) = torch.autograd.grad(output, received, grad, retain_graph=True)
        return input_grad, lambda: output.sum().backward(inputs=list(weights))

    assert messages(input_then_weights)[1].startswith(
        "after finish() the weights' .grad are their gradients for a gradient of ones"
    )


def test_the_first_part_sees_only_the_gradients_it_computes():
    """A right answer whose first part is a backward limited to received passes: the tensor
    hooks the checker watches with fire for a gradient computed, not for one merely possible."""
    ok, said = messages(right_with_backward_inputs)
    assert ok, said


# The average hook, as learners write it wrong.


def divides_before_and_after(p):
    p.grad /= dist.get_world_size()
    dist.all_reduce(p.grad)
    p.grad /= dist.get_world_size()


def divides_by_the_rank(p):
    dist.all_reduce(p.grad)
    p.grad /= dist.get_rank() + 1


def assigns_what_all_reduce_returns(p):
    p.grad = dist.all_reduce(p.grad) / dist.get_world_size()


def divides_out_of_place(p):
    dist.all_reduce(p.grad)
    p.grad.div(dist.get_world_size())


def divides_a_local_name(p):
    grad = p.grad
    dist.all_reduce(grad)
    grad = grad / dist.get_world_size()


def returns_the_average(p):
    dist.all_reduce(p.grad)
    return p.grad / dist.get_world_size()


def never_waits(p):
    dist.all_reduce(p.grad, async_op=True)
    p.grad /= dist.get_world_size()


def reduces_to_rank_0(p):
    dist.reduce(p.grad, dst=0)
    p.grad /= dist.get_world_size()


def world_size_not_called(p):
    dist.all_reduce(p.grad)
    p.grad /= dist.get_world_size


def treats_p_as_the_gradient(p):
    dist.all_reduce(p)
    p /= dist.get_world_size()


def test_dividing_before_and_after_the_all_reduce():
    assert hook_messages(divides_before_and_after)[1] == (
        "every rank holds the batch's gradient divided by 2 once more: average divides by the "
        "number of ranks twice. Divide once, before all_reduce or after it"
    )


def test_dividing_by_the_rank():
    assert hook_messages(divides_by_the_rank)[1].startswith(
        "the ranks hold different gradients: average uses dist.get_rank()"
    )


def test_assigning_what_all_reduce_returns():
    ok, said = hook_messages(assigns_what_all_reduce_returns)
    assert not ok and said.startswith("average(p) raised TypeError: unsupported operand")
    assert said.endswith(
        "dist.all_reduce returns None: it changes the tensor it is given, in place. Call it on its "
        "own line, then divide p.grad"
    )


def test_a_division_p_grad_never_gets():
    for fn, code in (
        (divides_out_of_place, "p.grad.div(dist.get_world_size())"),
        (divides_a_local_name, "grad = grad / dist.get_world_size()"),
    ):
        assert hook_messages(fn)[1].startswith(
            f"every rank holds twice the batch's gradient, the sum over the ranks: `{code}` makes "
            "a new tensor, and p.grad never gets it"
        ), fn.__name__


def test_returning_the_average_from_the_hook():
    said = hook_messages(returns_the_average)[1]
    assert said.startswith("average(p) raised RuntimeError: Tensor post accumulate grad hooks")
    assert "average returned a value: a post-accumulate-grad hook must return None" in said


def test_an_async_all_reduce_never_waited_for():
    assert hook_messages(never_waits)[1].startswith(
        "average starts the all-reduce with async_op=True and never waits for it"
    )


def test_reduce_to_one_rank_instead_of_all_reduce():
    assert hook_messages(reduces_to_rank_0)[1].startswith(
        "only rank 0 holds the batch's gradient: dist.reduce sends the sum to one rank"
    )


def test_get_world_size_without_its_call():
    assert hook_messages(world_size_not_called)[1].endswith(
        "dist.get_world_size is a function: call it, dist.get_world_size()"
    )


def test_p_taken_for_the_gradient():
    assert hook_messages(treats_p_as_the_gradient)[1] == (
        "each rank still holds the gradient of its own half: the all-reduce went to the "
        "parameter, not to its gradient. Reduce p.grad"
    )
