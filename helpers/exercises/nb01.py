"""Checkers for the exercises of notebook 01 (leaf nodes): each says what is wrong and why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from helpers.checks import CheckResult, feedback
from helpers.language import say
from helpers.shapes import shape_text

__all__ = [
    "KINDS",
    "LEAF_NO_GRAD",
    "LEAF_REQUIRES_GRAD",
    "NON_LEAF",
    "check_frozen_conv",
    "check_kinds",
    "check_leaves_of",
    "kind_of",
]

#: The text file the learner-facing messages come from (its [feedback] table).
TEXT = "01_leaf_nodes"

NON_LEAF = "non-leaf"
LEAF_REQUIRES_GRAD = "leaf, requires grad"
LEAF_NO_GRAD = "leaf, no grad"
#: The three answers of the classification exercise, in the order the print tip reads them.
KINDS = (NON_LEAF, LEAF_REQUIRES_GRAD, LEAF_NO_GRAD)


def kind_of(t: torch.Tensor) -> str:
    """Which of the three kinds a tensor is: 'non-leaf', 'leaf, requires grad', 'leaf, no grad'."""
    if not t.is_leaf:
        return NON_LEAF
    return LEAF_REQUIRES_GRAD if t.requires_grad else LEAF_NO_GRAD


def _why(name: str, t: torch.Tensor) -> str:
    kind = kind_of(t)
    if kind == NON_LEAF:
        return say(TEXT, "feedback.why_non_leaf", name=name, grad_fn=type(t.grad_fn).__name__)
    if kind == LEAF_REQUIRES_GRAD:
        return say(TEXT, "feedback.why_leaf_requires_grad", name=name)
    return say(TEXT, "feedback.why_leaf_no_grad", name=name)


def _normalise(answer: object) -> str | None:
    if not isinstance(answer, str):
        return None
    text = " ".join(answer.lower().replace(",", ", ").split())
    return text if text in KINDS else None


def check_kinds(answers: Mapping[str, object], **tensors: torch.Tensor) -> CheckResult:
    """Compare predicted kinds (answers[name] in KINDS) with the tensors' real state."""
    if not isinstance(answers, Mapping):
        return feedback([say(TEXT, "feedback.answers_not_a_dict", type=type(answers).__name__)])
    kinds = ", ".join(repr(k) for k in KINDS)
    unfilled = [name for name in tensors if answers.get(name, ...) is ...]
    if unfilled:
        return feedback(
            [
                say(TEXT, "feedback.unfilled", names=", ".join(unfilled)),
                say(TEXT, "feedback.each_answer_is_one_of", kinds=kinds),
            ]
        )
    problems = []
    for name, t in tensors.items():
        said = _normalise(answers[name])
        if said is None:
            problems.append(
                say(TEXT, "feedback.not_a_kind", name=name, answer=repr(answers[name]), kinds=kinds)
            )
        elif said != kind_of(t):
            problems.append(
                say(TEXT, "feedback.wrong_kind", name=name, said=repr(said), why=_why(name, t))
            )
    extra = [name for name in answers if name not in tensors]
    if extra:
        problems.append(say(TEXT, "feedback.no_such_tensor", names=", ".join(extra)))
    return feedback(problems, success=say(TEXT, "feedback.kinds_success", count=len(tensors)))


def _function_names(t: torch.Tensor) -> list[str]:
    """Names of every backward function in t's graph (walked through next_functions)."""
    names, seen, stack = [], set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.append(type(fn).__name__)
        stack.extend(child for child, _ in fn.next_functions)
    return names


def _times(got: torch.Tensor, expected: torch.Tensor) -> int | None:
    """k if got == k * expected for a whole number k > 1 (a gradient accumulated k times)."""
    nonzero = expected != 0
    if not nonzero.any():
        return None
    k = round(float((got[nonzero] / expected[nonzero]).mean()))
    return k if k > 1 and torch.allclose(got, k * expected) else None


def check_frozen_conv(net: torch.nn.Module, out: object, x: torch.Tensor) -> CheckResult:
    """Check that only net.conv is frozen, before the forward pass, and that backward() ran."""
    conv = [(f"conv.{n}", p) for n, p in net.conv.named_parameters()]
    linear = [(f"linear.{n}", p) for n, p in net.linear.named_parameters()]
    problems = []
    still = [name for name, p in conv if p.requires_grad]
    if still:
        problems.append(say(TEXT, "feedback.conv_still_requires_grad", names=", ".join(still)))
    too_many = [name for name, p in linear if not p.requires_grad]
    if too_many:
        problems.append(say(TEXT, "feedback.linear_frozen", names=", ".join(too_many)))
    if out is ...:
        problems.append(say(TEXT, "feedback.out_unfilled"))
    elif not isinstance(out, torch.Tensor):
        problems.append(say(TEXT, "feedback.out_not_a_tensor", type=type(out).__name__))
    if problems:
        return feedback(problems)
    assert isinstance(out, torch.Tensor)
    if not out.requires_grad:
        return feedback([say(TEXT, "feedback.out_no_grad")])
    if "ConvolutionBackward0" in _function_names(out):
        problems.append(say(TEXT, "feedback.conv_recorded"))
    filled = [name for name, p in conv if p.grad is not None]
    if filled:
        problems.append(
            say(TEXT, "feedback.conv_grad_filled", grads=", ".join(n + ".grad" for n in filled))
        )
    empty = [name for name, p in linear if p.grad is None]
    if empty:
        problems.append(
            say(TEXT, "feedback.linear_grad_none", grads=", ".join(n + ".grad" for n in empty))
        )
    if problems:
        return feedback(problems)
    params = [p for _, p in linear]
    expected = torch.autograd.grad(net(x).sum(), params)
    for (name, p), want in zip(linear, expected, strict=True):
        if not torch.allclose(p.grad, want):
            k = _times(p.grad, want)
            if k:
                problems.append(say(TEXT, "feedback.linear_grad_times", name=name, times=k))
            else:
                problems.append(say(TEXT, "feedback.linear_grad_wrong", name=name))
    return feedback(problems, success=say(TEXT, "feedback.frozen_conv_success"))


def _cases() -> list[tuple[str, torch.Tensor, list[str], dict[str, torch.Tensor]]]:
    """Small graphs: (description, root, names of the leaves backward() fills, all names)."""
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([1.0, 4.0], requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    y = w.detach() * 2
    names = {"w": w, "a": a, "b": b, "x": x, "y": y}
    return [
        (say(TEXT, "feedback.case_weighted_sum"), (w * x).sum(), ["w"], names),
        (say(TEXT, "feedback.case_w_three_times"), w * w + w, ["w"], names),
        (say(TEXT, "feedback.case_two_leaves"), (a * b + a * x).sum(), ["a", "b"], names),
        (say(TEXT, "feedback.case_w_itself"), w, ["w"], names),
        (say(TEXT, "feedback.case_x_itself"), x, [], names),
        (say(TEXT, "feedback.case_detached"), y, [], names),
    ]


def _names(tensors: list[torch.Tensor], known: dict[int, str]) -> str:
    return ", ".join(
        known.get(id(t)) or say(TEXT, "feedback.a_tensor_of_shape", shape=shape_text(t))
        for t in tensors
    )


def check_leaves_of(leaves_of: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Run leaves_of on small graphs; it must return the leaves backward() would fill, once each."""
    if not callable(leaves_of):
        return feedback(
            [say(TEXT, "feedback.leaves_of_not_callable", type=type(leaves_of).__name__)]
        )
    problems = []
    for what, root, expected, names in _cases():
        known = {id(t): name for name, t in names.items()}
        wanted = {id(names[name]) for name in expected}
        try:
            got = leaves_of(root)
        except Exception as err:  # the learner's code: report, never raise
            key = "leaves_of_raised_on_none" if "NoneType" in str(err) else "leaves_of_raised"
            problems.append(
                say(TEXT, f"feedback.{key}", what=what, error=type(err).__name__, message=err)
            )
            continue
        if got is None or got is ...:
            return feedback([say(TEXT, "feedback.leaves_of_unfilled", got=repr(got))])
        if not isinstance(got, (list, tuple)):
            problems.append(
                say(TEXT, "feedback.leaves_of_not_a_list", what=what, type=type(got).__name__)
            )
            continue
        if any(hasattr(item, "next_functions") for item in got):
            problems.append(say(TEXT, "feedback.leaves_of_backward_functions", what=what))
            continue
        if not all(isinstance(item, torch.Tensor) for item in got):
            kinds = sorted({type(item).__name__ for item in got})
            problems.append(
                say(TEXT, "feedback.leaves_of_not_tensors", what=what, types=", ".join(kinds))
            )
            continue
        ids = [id(t) for t in got]
        twice = list({id(t): t for i, t in enumerate(got) if id(t) in ids[:i]}.values())
        if twice:
            problems.append(
                say(TEXT, "feedback.leaves_of_twice", what=what, names=_names(twice, known))
            )
            continue
        missing = [names[name] for name in expected if id(names[name]) not in ids]
        extra = [t for t in got if id(t) not in wanted]
        if missing:
            key = "leaves_of_misses_root" if root.grad_fn is None else "leaves_of_misses"
            problems.append(say(TEXT, f"feedback.{key}", what=what, names=_names(missing, known)))
        if extra:
            problems.append(
                say(
                    TEXT,
                    "feedback.leaves_of_extra",
                    what=what,
                    count=len(extra),
                    names=_names(extra, known),
                )
            )
    return feedback(problems, success=say(TEXT, "feedback.leaves_of_success"))
