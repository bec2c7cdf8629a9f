"""Checkers for notebook 05 (freeing the graph): one backward for two losses; predicting memory."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F

from helpers.checks import CheckResult, feedback
from helpers.language import say
from helpers.memory import track_saved

__all__ = ["check_kept_alive", "check_one_backward"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "05_freeing_the_graph"

FLOAT32_BYTES = 4
#: (batch, width, depth) sizes on which a memory prediction is checked
SIZES = [(2, 3, 1), (4, 5, 2), (3, 8, 3), (16, 4, 4)]


def _error_text(err: BaseException) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first[:160]}"


def _grads(net: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    return {name: p.grad for name, p in net.named_parameters()}


def _reference_grads(
    make_net: Callable[[], torch.nn.Module], x: torch.Tensor, labels: torch.Tensor, which: str
) -> dict[str, torch.Tensor | None]:
    net = make_net()
    y = net(x)
    loss, z = F.mse_loss(y, labels), y.mean()
    {"loss": loss, "z": z, "both": loss + z}[which].backward()
    return _grads(net)


def _same(a: dict[str, torch.Tensor | None], b: dict[str, torch.Tensor | None]) -> bool:
    return all(
        a[k] is not None and b[k] is not None and torch.allclose(a[k], b[k], atol=1e-6) for k in a
    )


def check_one_backward(
    fn: Callable[[torch.Tensor, torch.Tensor], object],
    make_net: Callable[[], torch.nn.Module],
    x: torch.Tensor,
    labels: torch.Tensor,
) -> CheckResult:
    """Check `fn(loss, z)`: .grad of loss + z from ONE backward, nothing left in the graph."""
    with torch.random.fork_rng(devices=[]):  # make_net may draw numbers: leave the seed alone
        return _check_one_backward(fn, make_net, x, labels)


def _check_one_backward(
    fn: Callable[[torch.Tensor, torch.Tensor], object],
    make_net: Callable[[], torch.nn.Module],
    x: torch.Tensor,
    labels: torch.Tensor,
) -> CheckResult:
    try:
        expected = _reference_grads(make_net, x, labels, "both")
        net = make_net()
        with track_saved() as log:
            y = net(x)
            loss, z = F.mse_loss(y, labels), y.mean()
        try:
            fn(loss, z)
        except Exception as err:  # the learner's code: report, never raise
            key = "raised_second_backward" if "second time" in str(err) else "raised"
            return feedback([say(TEXT, f"feedback.{key}", error=_error_text(err))])
        got = _grads(net)
        missing = [name for name, g in got.items() if g is None]
        if len(missing) == len(got):
            return feedback([say(TEXT, "feedback.no_grad_yet")])
        if missing:
            return feedback([say(TEXT, "feedback.grad_none", name=n) for n in missing])
        problems = []
        reads = max(log.unpacks, default=0)
        if reads > 1:
            problems.append(say(TEXT, "feedback.backward_repeated", reads=reads))
        if _same(got, _reference_grads(make_net, x, labels, "loss")):
            problems.append(say(TEXT, "feedback.loss_only"))
        elif _same(got, _reference_grads(make_net, x, labels, "z")):
            problems.append(say(TEXT, "feedback.z_only"))
        elif not _same(got, expected) and not problems:
            wrong = [k for k in got if not torch.allclose(got[k], expected[k], atol=1e-6)]
            problems.append(say(TEXT, "feedback.grad_differs", name=wrong[0]))
        held = log.alive_bytes()
        if held:
            problems.append(say(TEXT, "feedback.graph_retained", held=held))
        return feedback(problems, success=say(TEXT, "feedback.one_backward_success"))
    except Exception as err:  # a broken make_net or inputs: say so instead of stopping Run All
        return feedback([say(TEXT, "feedback.check_failed", error=_error_text(err))])


def _measure(
    make_mlp: Callable[[int, int], torch.nn.Module], batch: int, width: int, depth: int
) -> int:
    """Bytes of the activations the graph of make_mlp(width, depth)(x).sum() alone holds."""
    with torch.random.fork_rng(devices=[]):  # building layers draws numbers: leave the seed alone
        model = make_mlp(width, depth)
    x = torch.ones(batch, width)
    known = {"x": x, **dict(model.named_parameters())}
    with track_saved(known) as log:
        model(x).sum()
    return log.packed_bytes(activations_only=True)


def _hint(predicted: dict[tuple[int, int, int], float]) -> str:
    """A hint for a typical wrong formula: the one that matches every prediction, if any."""
    f = FLOAT32_BYTES
    wrong = [
        (lambda b, w, d: d * b * w, "hint_elements"),
        (lambda b, w, d: 2 * d * b * w * f, "hint_twice"),
        # each Linear's saved input and the ReLU output before it counted apart, x left out
        (lambda b, w, d: (2 * d - 1) * b * w * f, "hint_twice"),
        (lambda b, w, d: (d + 1) * b * w * f, "hint_input"),
        (lambda b, w, d: (d - 1) * b * w * f, "hint_short"),
    ]
    params = [
        lambda b, w, d: d * (b * w + w * w + w) * f,
        lambda b, w, d: d * (b * w + w * w) * f,
        lambda b, w, d: (d * b * w + (d - 1) * w * w) * f,
        lambda b, w, d: ((d + 1) * b * w + d * (w * w + w)) * f,
        lambda b, w, d: ((d + 1) * b * w + (d - 1) * w * w) * f,
    ]
    wrong += [(formula, "hint_params") for formula in params]
    for formula, key in wrong:
        if all(predicted[size] == formula(*size) for size in predicted):
            return say(TEXT, f"feedback.{key}")
    for formula, key in wrong[1:]:  # the same mistakes, counted in elements instead of bytes
        if all(predicted[size] * f == formula(*size) for size in predicted):
            return say(TEXT, "feedback.hint_in_elements", hint=say(TEXT, f"feedback.{key}"))
    return say(TEXT, "feedback.hint_other")


def check_kept_alive(
    kept_alive: Callable[[int, int, int], object],
    make_mlp: Callable[[int, int], torch.nn.Module],
) -> CheckResult:
    """Check `kept_alive(batch, width, depth)` against bytes measured with saved-tensor hooks."""
    predicted: dict[tuple[int, int, int], float] = {}
    for size in SIZES:
        call = "kept_alive({}, {}, {})".format(*size)
        try:
            value = kept_alive(*size)
        except Exception as err:  # the learner's code: report, never raise
            return feedback(
                [say(TEXT, "feedback.formula_raised", call=call, error=_error_text(err))]
            )
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            shown = "..." if value is Ellipsis else type(value).__name__
            return feedback([say(TEXT, "feedback.not_bytes", call=call, shown=shown)])
        predicted[size] = value
    for size in SIZES:
        batch, width, depth = size
        try:
            actual = _measure(make_mlp, batch, width, depth)
        except Exception as err:  # a broken make_mlp: say so instead of stopping Run All
            error = _error_text(err)
            problem = say(TEXT, "feedback.measure_failed", width=width, depth=depth, error=error)
            return feedback([problem])
        if predicted[size] != actual:
            call = "kept_alive({}, {}, {})".format(*size)
            message = say(
                TEXT,
                "feedback.wrong_bytes",
                call=call,
                predicted=f"{predicted[size]:g}",
                actual=actual,
                hint=_hint(predicted),
            )
            return feedback([message])
    return feedback([], success=say(TEXT, "feedback.kept_alive_success"))
