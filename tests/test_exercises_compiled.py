"""Notebook 09c's exercise checker: the same loss and gradients, in one graph."""

from __future__ import annotations

import torch

from helpers.exercises.compiled import cases, check_one_graph, normalised_loss
from tests.text_edits import edit_feedback


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
    assert said(not_divided)[1].endswith("on the input whose loss is above 1")
    assert "no gradient for w" in said(detached)[1]
    assert said(wrong_grad)[1].startswith("the gradient for w differs")
    ok, text = said(normalised_loss)
    assert not ok and text.startswith("torch.compile still makes 2 graphs (first break:")


def test_answers_that_are_not_a_loss():
    assert "still `...`" in said(placeholder)[1] and "still `...`" in said(...)[1]
    assert said(5)[1] == "one_graph is a int, not a function"
    assert said(lambda x, w: (1, 2))[1] == (
        "one_graph returned a tuple: return the loss, a tensor with one element"
    )
    assert said(lambda x, w: 1 / 0)[1] == (
        "one_graph(x, w) raised ZeroDivisionError: division by zero"
    )
    assert said(lambda x, w: None)[1] == "one_graph returned nothing: return the loss"


def test_the_feedback_comes_from_the_text_file(monkeypatch):
    edit_feedback(monkeypatch, "09c_torch_compile_and_autograd", {"unfilled": "EDITED"})
    assert said(...)[1] == "EDITED"
