"""Mixed precision, measured: what fp16 and bf16 autocast do to gradients, and what GradScaler does.

Notebook 09b trains a small network under `torch.autocast` on the CPU and compares every
gradient with the float32 one:

    net, x, y = small_network()
    reference = autocast_grads(net, x, y, loss_weight=1e-5)                  # float32
    half = autocast_grads(net, x, y, loss_weight=1e-5, dtype=torch.float16)  # fp16, unscaled
    underflow_share(half, reference)   # share of entries that became exactly 0

`autocast_dtypes` records, from the run, which dtype each operation of that forward pass took
and gave (autocast casts only what its lists name, and the CPU's lists are not CUDA's).
`precision_sweep` does that for a range of loss weights (a loss term weighted 1e-5 has gradients
1e-5 times smaller), with fp16, fp16 with a loss scale, and bf16; `sweep_figure` draws it.
`clip_in_order` and `scaler_steps` are GradScaler's two traps, measured: clipping before
`unscale_`, and a step with an inf gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from helpers.display import Figure, Table, drawn_in_language, figure_phrase, figure_words
from helpers.language import phrase, say

__all__ = [
    "DTYPES",
    "LOSS_WEIGHTS",
    "SCALE",
    "autocast_dtypes",
    "autocast_grads",
    "clip_in_order",
    "format_table",
    "precision_sweep",
    "relative_error",
    "scaler_steps",
    "small_network",
    "sweep_figure",
    "underflow_share",
]

#: The three floating formats the notebook compares, by the name it shows.
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: GradScaler's initial scale (its default), 2 ** 16.
SCALE = 2.0**16
#: The loss weights of the sweep, from 1 down to 1e-7.
LOSS_WEIGHTS = (1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)


def format_table() -> Table:
    """Each format's range and precision, from torch.finfo (the smallest subnormal is the
    smallest normal times eps: the last bit of the mantissa at the smallest exponent)."""
    rows = []
    for name, dtype in DTYPES.items():
        info = torch.finfo(dtype)
        rows.append(
            {
                "dtype": name,
                "bits": info.bits,
                "largest": f"{info.max:.3g}",
                "smallest normal": f"{info.tiny:.3g}",
                "smallest subnormal": f"{info.tiny * info.eps:.3g}",
                "eps (precision)": f"{info.eps:.3g}",
            }
        )
    return Table(list(rows[0]), rows)


def small_network(seed: int = 0) -> tuple[nn.Module, Tensor, Tensor]:
    """Three linear layers with tanh between them, a batch of 64 inputs and targets (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)
    )
    return net, torch.randn(64, 16, generator=gen), torch.randn(64, 1, generator=gen)


def autocast_grads(
    net: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    loss_weight: float = 1.0,
    dtype: torch.dtype | None = None,
    scale: float = 1.0,
) -> dict[str, Tensor]:
    """Every parameter's gradient of `loss_weight * mse(net(x), y)`: under autocast to `dtype`
    (None: float32, no autocast), backward from the loss times `scale`, then divided by it."""
    if dtype not in (None, torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be None, torch.float16 or torch.bfloat16, not {dtype!r}")
    if not scale > 0:
        raise ValueError(f"scale must be a positive number, not {scale!r}")
    net.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        loss = loss_weight * nn.functional.mse_loss(net(x), y)
    (loss * scale).backward()
    return {name: p.grad / scale for name, p in net.named_parameters()}


class _DtypeRecorder(TorchFunctionMode):
    """Each torch call of the forward pass, with the dtypes of its tensor arguments and result."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[str], str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        inputs = [_dtype_name(a) for a in args if isinstance(a, Tensor)]
        if isinstance(result, Tensor):
            self.calls.append((getattr(func, "__name__", str(func)), inputs, _dtype_name(result)))
        return result


def _dtype_name(tensor: Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def autocast_dtypes(
    net: nn.Module, x: Tensor, y: Tensor, *, dtype: torch.dtype = torch.float16
) -> Table:
    """What autocast to `dtype` did to each call of `mse(net(x), y)` on the CPU, seen as it ran: the
    operation, the dtypes of its tensor arguments (weights included) and of its result."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be torch.float16 or torch.bfloat16, not {dtype!r}")
    recorder = _DtypeRecorder()
    with torch.autocast("cpu", dtype=dtype), recorder:
        nn.functional.mse_loss(net(x), y)
    rows = [
        {"operation": name, "arguments": ", ".join(inputs), "result": result}
        for name, inputs, result in recorder.calls
    ]
    return Table(["operation", "arguments", "result"], rows)


def underflow_share(grads: dict[str, Tensor], reference: dict[str, Tensor]) -> float:
    """The share of gradient entries that are exactly 0 where the reference's are not."""
    lost = sum(int(((grads[n] == 0) & (r != 0)).sum()) for n, r in reference.items())
    return lost / sum(r.numel() for r in reference.values())


def relative_error(grads: dict[str, Tensor], reference: dict[str, Tensor]) -> float:
    """The largest relative error of a parameter's gradient: |g - ref| / |ref|, over parameters."""
    return max(float((grads[n] - r).norm() / r.norm()) for n, r in reference.items())


def precision_sweep(weights: Sequence[float] = LOSS_WEIGHTS, seed: int = 0) -> list[dict[str, Any]]:
    """For each loss weight: the underflow share and relative error of fp16, of fp16 with the
    loss scaled by SCALE, and of bf16, each against float32."""
    net, x, y = small_network(seed)
    ways = {
        "float16": (torch.float16, 1.0),
        "float16 × scale": (torch.float16, SCALE),
        "bfloat16": (torch.bfloat16, 1.0),
    }
    rows = []
    for weight in weights:
        reference = autocast_grads(net, x, y, loss_weight=weight)
        row: dict[str, Any] = {"loss weight": weight}
        for name, (dtype, scale) in ways.items():
            grads = autocast_grads(net, x, y, loss_weight=weight, dtype=dtype, scale=scale)
            row[f"{name}: zeros"] = underflow_share(grads, reference)
            row[f"{name}: error"] = relative_error(grads, reference)
        rows.append(row)
    return rows


@drawn_in_language
def sweep_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Two panels against the loss weight: the share of gradient entries lost to 0, and the
    largest relative error, one line per way of computing."""
    from matplotlib.figure import Figure as MplFigure

    ways = [key.removesuffix(": zeros") for key in rows[0] if key.endswith(": zeros")]
    weights = [row["loss weight"] for row in rows]
    fig = MplFigure(figsize=(9, 3.2))  # pragma: no mutate (size, by eye)
    zeros, errors = fig.subplots(1, 2)
    # A way's name is a phrase of 09b's text file in the figure's language (the rows keep the
    # English key the cells compare); the text form says it in the learner's, as drawn or not.
    shown = {way: figure_phrase(way) for way in ways}
    for way, marker in zip(ways, "osd", strict=False):
        zeros.plot(weights, [r[f"{way}: zeros"] for r in rows], marker=marker, label=shown[way])
        errors.plot(weights, [r[f"{way}: error"] for r in rows], marker=marker, label=shown[way])
    zeros.set_ylabel(figure_words("zeros_axis"))
    errors.set_ylabel(figure_words("error_axis"))
    errors.set_yscale("log")
    for ax in (zeros, errors):
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel(figure_words("loss_weight_axis"))
        ax.grid(alpha=0.3)  # pragma: no mutate (a faint grid, by eye)
    zeros.legend(fontsize=8)  # pragma: no mutate (font size, by eye)
    fig.tight_layout()
    worst = rows[-1]
    zeros_text = ", ".join(
        say("common", "figures.way_zeros", way=phrase(None, w), share=f"{worst[w + ': zeros']:.0%}")
        for w in ways
    )
    description = say(
        "common", "figures.sweep_description", weight=f"{weights[-1]:g}", zeros=zeros_text
    )
    return Figure(fig, description=description)


def _step_size(before: dict[str, Tensor], net: nn.Module) -> float:
    return float(
        torch.cat([(p.detach() - before[n]).flatten() for n, p in net.named_parameters()]).norm()
    )


def clip_in_order(order: str, max_norm: float = 0.25, seed: int = 0) -> dict[str, float]:
    """One SGD step under fp16 autocast with GradScaler and gradient clipping.

    `order` is "unscale_, then clip" (right) or "clip, then unscale_" (the trap). Returns the
    norm the clip saw, the norm of the gradient the step used, and how far the weights moved.
    """
    orders = ("unscale_, then clip", "clip, then unscale_")
    if order not in orders:
        raise ValueError(f"order must be one of {orders}, not {order!r}")
    net, x, y = small_network(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.mse_loss(net(x), y)
    scaler.scale(loss).backward()
    if order == orders[0]:
        scaler.unscale_(optimizer)
        seen = nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    else:
        seen = nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.unscale_(optimizer)
    used = torch.cat([p.grad.flatten() for p in net.parameters()]).norm()
    scaler.step(optimizer)
    scaler.update()
    return {"norm the clip saw": float(seen), "norm stepped with": float(used),
            "weights moved": _step_size(before, net)}  # fmt: skip


def scaler_steps(batches: Sequence[tuple[Tensor, Tensor]], seed: int = 0) -> list[dict[str, Any]]:
    """GradScaler over several batches under fp16 autocast: per step, the scale it used, whether
    a gradient was inf or NaN, whether the weights moved, and the scale after update()."""
    net, _, _ = small_network(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    rows = []
    for step, (x, y) in enumerate(batches, start=1):
        before = {n: p.detach().clone() for n, p in net.named_parameters()}
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.mse_loss(net(x), y)
        used = scaler.get_scale()
        scaler.scale(loss).backward()
        finite = all(bool(torch.isfinite(p.grad).all()) for p in net.parameters())
        scaler.step(optimizer)  # skipped when a gradient is inf or NaN
        scaler.update()
        rows.append(
            {
                "step": step,
                "loss": float(loss.detach()),
                "scale used": used,
                "gradients finite": finite,
                "weights moved": _step_size(before, net) > 0,
                "scale after": scaler.get_scale(),
            }
        )
    return rows
