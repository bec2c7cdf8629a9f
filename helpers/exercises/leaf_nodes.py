"""Checkers for the exercises of notebook 01 (leaf nodes): each says what is wrong and why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from helpers.checks import CheckResult, feedback

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
        return (
            f"{name} is a non-leaf (grad_fn={type(t.grad_fn).__name__}): an operation made it, "
            "and one of its inputs requires grad (rule 3)"
        )
    if kind == LEAF_REQUIRES_GRAD:
        return (
            f"{name} is a leaf that requires grad: you created it with requires_grad=True and no "
            "operation made it (rule 2)"
        )
    return (
        f"{name} is a leaf that does not require grad: every tensor with requires_grad=False is "
        "a leaf (rule 1), also one made by an operation under torch.no_grad(), by detach(), or "
        "with an integer or bool result"
    )


def _normalise(answer: object) -> str | None:
    if not isinstance(answer, str):
        return None
    text = " ".join(answer.lower().replace(",", ", ").split())
    return text if text in KINDS else None


def check_kinds(answers: Mapping[str, object], **tensors: torch.Tensor) -> CheckResult:
    """Compare predicted kinds (answers[name] in KINDS) with the tensors' real state."""
    if not isinstance(answers, Mapping):
        return feedback([f"answers should be a dict of name -> kind, got {type(answers).__name__}"])
    unfilled = [name for name in tensors if answers.get(name, ...) is ...]
    if unfilled:
        return feedback(
            [f"replace the `...` with your prediction for: {', '.join(unfilled)}"]
            + [f"each answer is one of: {', '.join(repr(k) for k in KINDS)}"]
        )
    problems = []
    for name, t in tensors.items():
        said = _normalise(answers[name])
        if said is None:
            problems.append(
                f"{name}: {answers[name]!r} is not one of {', '.join(repr(k) for k in KINDS)}"
            )
        elif said != kind_of(t):
            problems.append(f"{name}: you said {said!r}, but {_why(name, t)}")
    extra = [name for name in answers if name not in tensors]
    if extra:
        problems.append(f"no tensor called {', '.join(extra)} in this exercise")
    return feedback(problems, success=f"All {len(tensors)} predictions are right.")


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
        problems.append(
            f"{', '.join(still)} still require grad: switch the flag off with "
            "requires_grad_(False) (parameters are leaves, so you may)"
        )
    too_many = [name for name, p in linear if not p.requires_grad]
    if too_many:
        problems.append(
            f"{', '.join(too_many)} no longer require grad: freeze only the conv layer, the "
            "linear layer must still learn"
        )
    if out is ...:
        problems.append("out is still `...`: run the net on x")
    elif not isinstance(out, torch.Tensor):
        problems.append(f"out should be the net's output tensor, got {type(out).__name__}")
    if problems:
        return feedback(problems)
    assert isinstance(out, torch.Tensor)
    if not out.requires_grad:
        return feedback(
            [
                "out does not require grad, so backward() cannot run from it: was it computed "
                "under torch.no_grad()? Freezing happens per parameter, not per forward pass"
            ]
        )
    if "ConvolutionBackward0" in _function_names(out):
        problems.append(
            "out's graph still records the convolution (ConvolutionBackward0): the conv layer "
            "was frozen after the forward pass. Freeze first, then run the net"
        )
    filled = [name for name, p in conv if p.grad is not None]
    if filled:
        problems.append(
            f"{', '.join(n + '.grad' for n in filled)} is filled: backward() ran before the "
            "layer was frozen. Start again from a fresh net and freeze first"
        )
    empty = [name for name, p in linear if p.grad is None]
    if empty:
        problems.append(
            f"{', '.join(n + '.grad' for n in empty)} is None: call backward() on out.sum()"
        )
    if problems:
        return feedback(problems)
    params = [p for _, p in linear]
    expected = torch.autograd.grad(net(x).sum(), params)
    for (name, p), want in zip(linear, expected, strict=True):
        if not torch.allclose(p.grad, want):
            k = _times(p.grad, want)
            if k:
                problems.append(
                    f"{name}.grad is {k} times d(out.sum())/d({name}): .grad accumulates, so "
                    f"backward() ran {k} times. Start again from a fresh net and run it once"
                )
            else:
                problems.append(
                    f"{name}.grad is not d(out.sum())/d({name}): call backward() on out.sum()"
                )
    return feedback(
        problems,
        success="Only the linear layer gets .grad, and the convolution is not even recorded.",
    )


def _cases() -> list[tuple[str, torch.Tensor, list[str], dict[str, torch.Tensor]]]:
    """Small graphs: (description, root, names of the leaves backward() fills, all names)."""
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([1.0, 4.0], requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    y = w.detach() * 2
    names = {"w": w, "a": a, "b": b, "x": x, "y": y}
    return [
        ("y = (w * x).sum()", (w * x).sum(), ["w"], names),
        ("y = w * w + w (w used three times)", w * w + w, ["w"], names),
        ("y = (a * b + a * x).sum()", (a * b + a * x).sum(), ["a", "b"], names),
        ("w itself (a leaf that requires grad)", w, ["w"], names),
        ("x itself (requires_grad=False)", x, [], names),
        ("y = w.detach() * 2 (no graph at all)", y, [], names),
    ]


def _names(tensors: list[torch.Tensor], known: dict[int, str]) -> str:
    return ", ".join(known.get(id(t), f"a tensor of shape {list(t.shape)}") for t in tensors)


def check_leaves_of(leaves_of: Callable[[torch.Tensor], Any]) -> CheckResult:
    """Run leaves_of on small graphs; it must return the leaves backward() would fill, once each."""
    if not callable(leaves_of):
        return feedback([f"leaves_of should be a function, got {type(leaves_of).__name__}"])
    problems = []
    for what, root, expected, names in _cases():
        known = {id(t): name for name, t in names.items()}
        wanted = {id(names[name]) for name in expected}
        try:
            got = leaves_of(root)
        except Exception as err:  # the learner's code: report, never raise
            hint = ""
            if "NoneType" in str(err):
                hint = (
                    ". Hint: an entry of next_functions is (None, 0) for an input that does not "
                    "require grad; skip it"
                )
            problems.append(f"on {what}, leaves_of raised {type(err).__name__}: {err}{hint}")
            continue
        if got is None or got is ...:
            return feedback(
                [f"leaves_of returned {got!r}: replace the `...` and return a list of tensors"]
            )
        if not isinstance(got, (list, tuple)):
            problems.append(
                f"on {what}, leaves_of returned a {type(got).__name__}; return a list of tensors"
            )
            continue
        if any(hasattr(item, "next_functions") for item in got):
            problems.append(
                f"on {what}, leaves_of returned backward functions (such as AccumulateGrad); "
                "return the leaf tensors: an AccumulateGrad node keeps its leaf in .variable"
            )
            continue
        if not all(isinstance(item, torch.Tensor) for item in got):
            kinds = sorted({type(item).__name__ for item in got})
            problems.append(f"on {what}, leaves_of returned {', '.join(kinds)}; return tensors")
            continue
        ids = [id(t) for t in got]
        twice = list({id(t): t for i, t in enumerate(got) if id(t) in ids[:i]}.values())
        if twice:
            problems.append(
                f"on {what}, leaves_of lists {_names(twice, known)} more than once: a leaf used "
                "several times is still one tensor; remember which nodes you have visited"
            )
            continue
        missing = [names[name] for name in expected if id(names[name]) not in ids]
        extra = [t for t in got if id(t) not in wanted]
        if missing:
            hint = ""
            if root.grad_fn is None:
                hint = ": it has no grad_fn, but a leaf that requires grad is its own leaf"
            problems.append(f"on {what}, leaves_of misses {_names(missing, known)}{hint}")
        if extra:
            problems.append(
                f"on {what}, leaves_of returned {len(extra)} tensor(s) that backward() would not "
                f"fill ({_names(extra, known)}): only leaves that require grad get .grad"
            )
    return feedback(problems, success="leaves_of finds every leaf backward() fills, once each.")
