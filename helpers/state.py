"""The autograd state of named tensors as a table: flags, grad_fn, .grad, version, storage."""

from __future__ import annotations

import warnings

import torch

from helpers import naming
from helpers.display import Table
from helpers.language import say
from helpers.shapes import shape_text

__all__ = ["STATE_COLUMNS", "describe_grad", "tensor_state"]

STATE_COLUMNS = [
    "tensor",
    "shape",
    "requires_grad",
    "is_leaf",
    "grad_fn",
    "grad",
    "retains_grad",
    "version",
    "shares storage with",
]
#: Dtypes that make tensor_state add a "dtype" column: mixed precision, where dtype is the story.
REDUCED_PRECISION = (torch.float16, torch.bfloat16)


def describe_grad(grad: torch.Tensor | None, max_values: int = 6) -> str:
    """'None', the values of a small gradient (4 significant digits), or, for a larger one, its
    shape and norm in the learner's language: "[0.75, 1]" or "shape [2, 1, 3, 3], norm 2.232"."""
    if grad is None:
        return "None"
    if grad.numel() <= max_values:
        values = grad.detach().reshape(-1).tolist()
        return "[" + ", ".join(format(v, ".4g") for v in values) + "]"
    norm = float(grad.detach().double().norm())
    return say("common", "tables.grad_shape_norm", shape=shape_text(grad), norm=f"{norm:.4g}")


def _read_grad(t: torch.Tensor) -> torch.Tensor | None:
    # Reading .grad of a non-leaf warns; the table reports it without the warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return t.grad


def _storage_key(t: torch.Tensor) -> int | None:
    if t.is_sparse or t.numel() == 0:
        return None
    return t.untyped_storage().data_ptr()


def tensor_state(tensors: object = None, /, **named_tensors: torch.Tensor) -> Table:
    """A table of each tensor's autograd state, e.g. tensor_state(x=x, w=w, loss=loss); a model
    or a dict of name -> tensor may come first (`helpers.naming`): tensor_state(model, x=x).

    When a tensor is float16 or bfloat16, a "dtype" column shows every tensor's dtype and its
    .grad's (mixed precision); otherwise the column is left out."""
    if tensors is not None:
        named_tensors = {
            **naming.named_tensors(tensors, "tensor_state()'s first argument"),
            **named_tensors,
        }
    if not named_tensors:
        raise TypeError("tensor_state() needs named tensors, e.g. tensor_state(x=x, loss=loss)")
    for name, t in named_tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"tensor_state(): {name}= is {naming.a_type(t)}, not a tensor; "
                f"pass tensors by name, e.g. tensor_state({name}=my_tensor)"
            )
    keys = {name: _storage_key(t) for name, t in named_tensors.items()}
    reduced = any(t.dtype in REDUCED_PRECISION for t in named_tensors.values())
    rows = []
    for name, t in named_tensors.items():
        sharing = [
            other
            for other, key in keys.items()
            if other != name and key is not None and key == keys[name]
        ]
        rows.append(
            {
                "tensor": name,
                "shape": shape_text(t),
                "requires_grad": t.requires_grad,
                "is_leaf": t.is_leaf,
                "grad_fn": None if t.grad_fn is None else type(t.grad_fn).__name__,
                "grad": describe_grad(_read_grad(t)),
                "retains_grad": t.retains_grad,
                "version": t._version,
                "shares storage with": ", ".join(sharing) or "-",
                **({"dtype": _dtypes(t)} if reduced else {}),
            }
        )
    columns = list(STATE_COLUMNS)
    if reduced:
        columns.insert(columns.index("shape") + 1, "dtype")
    return Table(columns, rows)


def _dtypes(t: torch.Tensor) -> str:
    """The tensor's dtype, and its .grad's when it has one: "float32 (grad float32)"."""
    name = str(t.dtype).removeprefix("torch.")
    grad = _read_grad(t)
    return name if grad is None else f"{name} (grad {str(grad.dtype).removeprefix('torch.')})"
