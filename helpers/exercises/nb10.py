"""Checkers for notebook 10 (check yourself): write a question of your own; predict the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from helpers.checks import CheckResult, feedback
from helpers.interactive.backward_recorder import record_backward
from helpers.language import say
from helpers.quiz import CHOICES, TOPICS, Question

__all__ = ["check_order", "check_question", "engine_order"]

Build = Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]
TEXT = "10_check_yourself"


def _say(key: str, **values: Any) -> str:
    return say(TEXT, f"feedback.{key}", **values)


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def check_question(question: object) -> CheckResult:
    """Check a Question written by the learner: complete, and its answer is what torch does."""
    if not isinstance(question, Question):
        return feedback([_say("not_a_question", type=type(question).__name__)])
    fields = ["topic", "prompt", "code", "answer", "misconception", "fact", "probe"]
    unfilled = [name for name in fields if getattr(question, name) is Ellipsis]
    if unfilled:
        return feedback([_say("unfilled", fields=", ".join(unfilled))])
    problems = []
    if question.topic not in TOPICS:
        problems.append(_say("unknown_topic", topics=", ".join(TOPICS), topic=repr(question.topic)))
    if not (_is_text(question.prompt) and question.prompt.strip().endswith(("?", "？"))):
        problems.append(_say("prompt_not_a_question"))
    if not _is_text(question.code):
        problems.append(_say("code_not_text"))
    if question.answer not in CHOICES:
        problems.append(_say("answer_not_a_choice", answer=repr(question.answer)))
    if not _is_text(question.misconception):
        problems.append(_say("misconception_not_text"))
    if not _is_text(question.fact):
        problems.append(_say("fact_not_text"))
    if question.probe is not None and not _is_text(question.probe):
        problems.append(_say("probe_not_text"))
    problems += [_say(key) for key, _ in question.mistakes()]
    if problems:
        return feedback(problems)
    try:
        observed = question.run()
    except AssertionError as err:
        return feedback([_say("program_failed", error=err)])
    except SyntaxError as err:
        return feedback([_say("not_python", message=err.msg)])
    except Exception as err:  # the probe failed: report, never raise
        return feedback([_say("probe_raised", error=type(err).__name__, message=err)])
    if observed.answer != question.answer:
        return feedback(
            [
                _say(
                    "answer_swapped",
                    answer=repr(question.answer),
                    observed=repr(observed.answer),
                    detail=observed.detail,
                )
            ]
        )
    return feedback([], success=_say("success_question", observed=repr(observed.answer)))


def engine_order(build: Build) -> list[str]:
    """The names of the backward functions in the order the engine runs them (recorded live)."""
    root, params = build()
    return [step.name for step in record_backward(root, params).steps]


def check_order(predicted: object, build: Build) -> CheckResult:
    """Check a predicted list of backward-function names against the order the engine ran."""
    if predicted is Ellipsis or (isinstance(predicted, list) and Ellipsis in predicted):
        return feedback([_say("order_unfilled")])
    if not isinstance(predicted, (list, tuple)) or not all(isinstance(p, str) for p in predicted):
        return feedback([_say("order_not_names")])
    actual = engine_order(build)
    problems = []
    if len(predicted) != len(actual):
        problems.append(_say("order_count", actual=len(actual), predicted=len(predicted)))
    for i, (mine, real) in enumerate(zip(predicted, actual, strict=False), start=1):
        if mine != real:
            problems.append(_say("order_step", step=i, said=mine, ran=real))
            break
    return feedback(problems, success=_say("success_order", order=" → ".join(actual)))
