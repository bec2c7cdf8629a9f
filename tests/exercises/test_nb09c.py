"""Notebook 09c's exercise checker: the same loss and gradients, in one graph."""

from __future__ import annotations

import pytest
import torch

from helpers.exercises.nb09c import cases, check_one_graph, normalised_loss


def clamped(x, w):
    loss = torch.tanh(x @ w).pow(2).sum()
    return loss / loss.detach().clamp(min=1.0)


def where(x, w):
    loss = torch.tanh(x @ w).pow(2).sum()
    return torch.where(loss > 1, loss / loss.detach(), loss)


def divisor_with_gradient(x, w):
    loss = torch.tanh(x @ w).pow(2).sum()
    return loss / loss.clamp(min=1.0)


def not_divided(x, w):
    return torch.tanh(x @ w).pow(2).sum()


def detached(x, w):
    return clamped(x, w).detach()


def wrong_grad(x, w):
    loss = torch.tanh(x @ w).pow(2).sum()
    return loss / loss.detach().clamp(min=1.0) + (w - w.detach()).sum()  # value + 0, grad + 1


def placeholder(x, w):
    """As the notebook's cell starts."""
    ...


def said(fn):
    result = check_one_graph(fn)
    return result.ok, " ".join(result.messages)


def test_the_cases_lie_on_both_sides_of_1():
    (above, xa, wa), (below, xb, wb) = cases()
    assert (above, below) == ("above_1", "below_1")
    assert torch.tanh(xa @ wa).pow(2).sum() > 1 > torch.tanh(xb @ wb).pow(2).sum()


def test_right_answers_pass_however_written():
    for fn in (clamped, where):
        ok, text = said(fn)
        assert ok, text
    assert check_one_graph(clamped).success.startswith("right: the same loss")


def test_each_usual_mistake_gets_its_message():
    assert "your divisor is the loss itself" in said(divisor_with_gradient)[1]
    assert said(not_divided)[1].startswith("where the loss is above 1 your function returns it")
    assert "no gradient for w" in said(detached)[1]
    assert said(wrong_grad)[1].startswith("the gradient for w differs")
    ok, text = said(normalised_loss)
    assert not ok and text.startswith("torch.compile still makes 2 graphs (first break:")


def test_answers_that_are_not_a_loss():
    assert "still `...`" in said(placeholder)[1] and "still `...`" in said(...)[1]
    assert said(5)[1] == "one_graph is an int, not a function"
    assert said(lambda x, w: (1, 2))[1] == (
        "one_graph returned a tuple: return the loss, a tensor with one element"
    )
    assert said(lambda x, w: 1 / 0)[1] == (
        "one_graph(x, w) raised ZeroDivisionError: division by zero"
    )
    assert said(lambda x, w: None)[1] == "one_graph returned nothing: return the loss"


def test_the_cases_are_the_seeded_draws_and_a_tenth_of_them():
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 3, generator=gen), torch.randn(3, 2, generator=gen)
    (_, xa, wa), (_, xb, wb) = cases()
    assert torch.equal(xa, x) and torch.equal(wa, w)
    assert torch.equal(xb, 0.1 * x) and torch.equal(wb, 0.1 * w)


def test_a_loss_between_1_and_2_is_divided_to_1():
    x = torch.ones(1, 1)
    w = torch.full((1, 2), float(torch.atanh(torch.tensor(0.75).sqrt())), requires_grad=True)
    assert float(torch.tanh(x @ w).pow(2).sum().detach()) == pytest.approx(1.5)
    assert float(normalised_loss(x, w).detach()) == pytest.approx(1.0)


def test_whole_messages_name_the_input_and_the_break():
    assert said(wrong_grad)[1] == (
        "the gradient for w differs from normalised_loss's on the input whose loss is above 1"
    )
    assert said(lambda x, w: clamped(x, w) + 0.5)[1] == (
        "the loss differs from normalised_loss's on the input whose loss is above 1"
    )
    from helpers.compiled_graphs import compile_report

    _, x, w = cases()[0]
    reason = compile_report(normalised_loss, x, w.clone().requires_grad_())["reasons"][0]
    expected = f"torch.compile still makes 2 graphs (first break: {reason})"
    assert said(normalised_loss)[1].startswith(expected)


def test_a_function_dynamo_will_not_compile_is_not_one_graph():
    def retains(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        loss.retain_grad()  # torch 2.11 and later leave such a function to eager: 0 graphs
        return loss / loss.detach().clamp(min=1.0)

    ok, text = said(retains)
    assert ok or text.startswith("torch.compile still makes 0 graphs (first break: -)")


def test_an_error_while_counting_graphs_is_reported(monkeypatch):

    def broken(*args):
        raise RuntimeError("dynamo fell over")

    from helpers.exercises import nb09c

    monkeypatch.setattr(nb09c, "compile_report", broken)
    assert said(clamped)[1] == "one_graph(x, w) raised RuntimeError: dynamo fell over"

    def silent(x, w):
        raise ValueError

    monkeypatch.undo()
    assert said(silent)[1] == "one_graph(x, w) raised ValueError: "


def nearly(x, w):
    """Right within a millionth: the value and every gradient 4e-7 off (float32's noise)."""
    return clamped(x, w) + 4e-7 * ((w - w.detach()).sum() + 1)


def half_the_gradient(x, w):
    value = clamped(x, w)
    return value - 0.5 * (value - value.detach())  # the same value, half its gradient


def divisor_with_gradient_and_noise(x, w):
    loss = torch.tanh(x @ w).pow(2).sum()
    return loss / loss.clamp(min=1.0) + 1e-7 * (w - w.detach()).sum()  # gradient 0 + 1e-7


def test_rounding_is_forgiven_and_a_wrong_gradient_is_not_a_zero_one():
    assert said(nearly) == (True, "")  # the loss below 1 is 0.0005: only an absolute tolerance
    assert said(half_the_gradient)[1] == (
        "the gradient for w differs from normalised_loss's on the input whose loss is above 1"
    )
    assert "your divisor is the loss itself" in said(divisor_with_gradient_and_noise)[1]


# Wrong answers as learners write them: each gets a message that names what it did.

CONSTANT_ABOVE_1 = (
    "the value is right but the gradient is 0 where the loss is above 1: there your function "
    "returns a constant 1, which no longer depends on w."
)


def test_where_that_returns_1_above_the_threshold_is_not_blamed_on_a_divisor():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss > 1, torch.ones_like(loss), loss)

    text = said(one_graph)[1]
    assert text.startswith(CONSTANT_ABOVE_1)
    assert "divisor is the loss itself" not in text


def test_the_loss_clamped_at_1():
    def one_graph(x, w):
        return torch.tanh(x @ w).pow(2).sum().clamp(max=1.0)

    assert said(one_graph)[1].startswith(CONSTANT_ABOVE_1)


def test_where_with_the_comparison_reversed():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss < 1, loss / loss.detach(), loss)

    assert said(one_graph)[1].startswith(
        "your loss is divided where it is below 1 and left as it is where it is above 1"
    )


def test_the_divisor_clamped_from_above():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss / loss.detach().clamp(max=1.0)

    assert said(one_graph)[1].startswith("your loss is divided where it is below 1")


def test_divided_whatever_the_loss():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss / loss.detach()

    assert said(one_graph)[1].startswith(
        "where the loss is below 1 your function divides it too (the result is 1)"
    )


def test_multiplied_instead_of_divided():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss * loss.detach().clamp(min=1.0)

    assert said(one_graph)[1].startswith(
        "where the loss is above 1 your function multiplies it by its value"
    )


def test_a_divisor_of_torch_maximum_with_its_gradient():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss / torch.maximum(loss, torch.ones_like(loss))

    assert "your divisor is the loss itself" in said(one_graph)[1]


def test_where_that_divides_by_the_loss_itself():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss > 1, loss / loss, loss)

    assert "your divisor is the loss itself" in said(one_graph)[1]


def test_float_of_the_divisor_still_breaks_the_graph():
    import warnings

    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss / float(loss.clamp(min=1.0))

    with warnings.catch_warnings():  # float() of a tensor that requires grad warns
        warnings.simplefilter("ignore")
        text = said(one_graph)[1]
    assert text.startswith("torch.compile still makes 2 graphs (first break: ")


def test_a_divisor_taken_as_a_reciprocal_with_its_gradient():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return loss * loss.clamp(min=1.0).reciprocal()

    assert "your divisor is the loss itself" in said(one_graph)[1]


def test_a_constant_1_made_by_a_detached_divisor_is_not_blamed_on_the_divisor():
    def one_graph(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss > 1, (loss * 0 + loss.detach()) / loss.detach(), loss)

    text = said(one_graph)[1]
    assert text.startswith(CONSTANT_ABOVE_1)
    assert "divisor is the loss itself" not in text


def test_a_wrong_value_names_the_side_it_is_on():
    def wrong_above(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss > 1, loss * 3, loss / loss.detach())

    def wrong_below(x, w):
        loss = torch.tanh(x @ w).pow(2).sum()
        return torch.where(loss > 1, loss / loss.detach(), loss * 3)

    differs = "the loss differs from normalised_loss's on the input whose loss is"
    assert said(wrong_above) == (False, f"{differs} above 1")
    assert said(wrong_below) == (False, f"{differs} below 1")
