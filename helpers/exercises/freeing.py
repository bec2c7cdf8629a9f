"""Checkers for notebook 05 (freeing the graph): one backward for two losses; predicting memory."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F

from helpers.checks import CheckResult, feedback
from helpers.memory import track_saved

__all__ = ["check_kept_alive", "check_one_backward"]

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
            hint = ""
            if "second time" in str(err):
                hint = (
                    " (the second backward() met saved tensors the first one freed: "
                    "add the two losses and call backward() once)"
                )
            return feedback([f"your function raised {_error_text(err)}{hint}"])
        got = _grads(net)
        missing = [name for name, g in got.items() if g is None]
        if len(missing) == len(got):
            return feedback(
                [
                    "no parameter has a .grad yet: call backward() once, on loss + z "
                    "(still a `...` in the cell?)"
                ]
            )
        if missing:
            return feedback(
                [f"net.{n}.grad is None: did backward() start from loss + z?" for n in missing]
            )
        problems = []
        reads = max(log.unpacks, default=0)
        if reads > 1:
            problems.append(
                f"backward ran through the shared layers {reads} times (their saved tensors were "
                "read that often): add the losses and call backward() once"
            )
        if _same(got, _reference_grads(make_net, x, labels, "loss")):
            problems.append("the gradients are those of loss alone: z is missing from the sum")
        elif _same(got, _reference_grads(make_net, x, labels, "z")):
            problems.append("the gradients are those of z alone: loss is missing from the sum")
        elif not _same(got, expected) and not problems:
            wrong = [k for k in got if not torch.allclose(got[k], expected[k], atol=1e-6)]
            problems.append(
                f"net.{wrong[0]}.grad differs from the gradient of loss + z: call backward() "
                "once, on the sum"
            )
        held = log.alive_bytes()
        if held:
            problems.append(
                f"after your code the graph still holds {held} bytes of saved tensors: "
                "drop retain_graph=True, one backward() does not need it"
            )
        return feedback(
            problems,
            success="One backward pass through the shared layers, and the graph is freed.",
        )
    except Exception as err:  # a broken make_net or inputs: say so instead of stopping Run All
        return feedback([f"could not run the check: {_error_text(err)}"])


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
        (
            lambda b, w, d: d * b * w,
            "that is the number of elements; a float32 element takes 4 bytes",
        ),
        (
            lambda b, w, d: 2 * d * b * w * f,
            "twice too much: a ReLU output is saved by ReluBackward0 and by the next "
            "AddmmBackward0, but it is one storage (count it once), and the Linear output "
            "before the ReLU is not saved at all",
        ),
        (
            lambda b, w, d: (d + 1) * b * w * f,
            "the input x is held by you anyway: count only what the graph alone keeps alive",
        ),
        (
            lambda b, w, d: (d - 1) * b * w * f,
            "one activation short: the last ReLU output is saved too, by its ReluBackward0",
        ),
    ]
    params = [
        lambda b, w, d: d * (b * w + w * w + w) * f,
        lambda b, w, d: d * (b * w + w * w) * f,
        lambda b, w, d: (d * b * w + (d - 1) * w * w) * f,
        lambda b, w, d: ((d + 1) * b * w + d * (w * w + w)) * f,
        lambda b, w, d: ((d + 1) * b * w + (d - 1) * w * w) * f,
    ]
    wrong += [
        (
            formula,
            "parameters are held by the model anyway: count only what the graph alone keeps alive",
        )
        for formula in params
    ]
    for formula, hint in wrong:
        if all(predicted[size] == formula(*size) for size in predicted):
            return hint
    return "look at the table in section 8: which saved tensors are held by the graph only?"


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
            return feedback([f"{call} raised {_error_text(err)}"])
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            shown = "..." if value is Ellipsis else type(value).__name__
            return feedback(
                [f"{call} returned {shown}, not a number of bytes: replace the ... with a formula"]
            )
        predicted[size] = value
    for size in SIZES:
        batch, width, depth = size
        try:
            actual = _measure(make_mlp, batch, width, depth)
        except Exception as err:  # a broken make_mlp: say so instead of stopping Run All
            return feedback([f"could not measure make_mlp({width}, {depth}): {_error_text(err)}"])
        if predicted[size] != actual:
            call = "kept_alive({}, {}, {})".format(*size)
            return feedback(
                [
                    f"{call} = {predicted[size]:g}, but that graph keeps {actual} bytes alive: "
                    + _hint(predicted)
                ]
            )
    return feedback(
        [],
        success="Right: one float32 (batch, width) activation per block, each storage once.",
    )
