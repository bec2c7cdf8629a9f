"""Checkers for notebook 10 (check yourself): write a question of your own; predict the engine."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.checks import CheckResult, feedback
from helpers.quiz import CHOICES, TOPICS, Question
from helpers.widget_logic import record_backward

__all__ = ["check_order", "check_question", "engine_order"]

Build = Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def check_question(question: object) -> CheckResult:
    """Check a Question written by the learner: complete, and its answer is what torch does."""
    if not isinstance(question, Question):
        return feedback([f"make a Question(...), not a {type(question).__name__}"])
    fields = ["topic", "prompt", "code", "answer", "misconception", "fact", "probe"]
    unfilled = [name for name in fields if getattr(question, name) is Ellipsis]
    if unfilled:
        return feedback([f"replace the `...` of {', '.join(unfilled)}"])
    problems = []
    if question.topic not in TOPICS:
        problems.append(f"topic should be one of {', '.join(TOPICS)}; it is {question.topic!r}")
    if not (_is_text(question.prompt) and question.prompt.strip().endswith("?")):
        problems.append("prompt should be a yes/no question ending in '?'")
    if not _is_text(question.code):
        problems.append("code should be the short program, as a string")
    if question.answer not in CHOICES:
        problems.append(f"answer should be 'yes' or 'no'; it is {question.answer!r}")
    for name in ("misconception", "fact"):
        if not _is_text(getattr(question, name)):
            problems.append(f"{name} should say, in a sentence, {_WHAT[name]}")
    if question.probe is not None and not _is_text(question.probe):
        problems.append(
            "probe should be an expression as a string, e.g. 'y.grad is None', or None for "
            "a 'does the last line raise?' question"
        )
    if problems:
        return feedback(problems)
    try:
        observed = question.run()
    except AssertionError as err:
        return feedback([f"{err}: with a probe, the program itself must run"])
    except SyntaxError as err:
        return feedback([f"the code or the probe is not valid Python: {err.msg}"])
    except Exception as err:  # the probe failed: report, never raise
        return feedback([f"evaluating the probe raised {type(err).__name__}: {err}"])
    if observed.answer != question.answer:
        return feedback(
            [
                f"your answer is {question.answer!r}, but running it gives {observed.answer!r} "
                f"({observed.detail}); a surprise worth a question, with the answer swapped"
            ]
        )
    return feedback([], success=f"A good question: running it gives {observed.answer!r}.")


_WHAT = {
    "misconception": "the wrong belief a wrong answer comes from",
    "fact": "what really happens, and why",
}


def engine_order(build: Build) -> list[str]:
    """The names of the backward functions in the order the engine runs them (recorded live)."""
    root, params = build()
    return [step.name for step in record_backward(root, params).steps]


def check_order(predicted: object, build: Build) -> CheckResult:
    """Check a predicted list of backward-function names against the order the engine ran."""
    if predicted is Ellipsis or (isinstance(predicted, list) and Ellipsis in predicted):
        return feedback(["replace the `...` with the names, e.g. ['AddBackward0', ...]"])
    if not isinstance(predicted, (list, tuple)) or not all(isinstance(p, str) for p in predicted):
        return feedback(["give a list of names (strings), e.g. ['AddBackward0', 'SumBackward0']"])
    actual = engine_order(build)
    problems = []
    if len(predicted) != len(actual):
        problems.append(
            f"the engine ran {len(actual)} backward functions, you listed {len(predicted)}: "
            "count one AccumulateGrad per leaf that requires grad (once, even for a leaf used "
            "twice: its gradients are summed before it runs)"
        )
    for i, (mine, real) in enumerate(zip(predicted, actual, strict=False), start=1):
        if mine != real:
            problems.append(
                f"step {i}: you said {mine}, the engine ran {real}. Among the functions whose "
                "gradients are complete, it runs the one created last in the forward pass, "
                "and an AccumulateGrad waits until every use of its leaf has sent a gradient"
            )
            break
    return feedback(problems, success=f"Right: {' → '.join(actual)}.")
