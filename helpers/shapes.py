"""How the course writes a tensor's shape: `[2, 3]`, and `scalar` for a 0-d tensor.

Every table, graph label and message that shows a shape to the learner calls `shape_text`, so the
notation is the same everywhere, and the same as `torch.Size` prints it (`torch.Size([2, 3])`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

import torch

__all__ = ["SCALAR", "shape_text"]

#: The text of a 0-d tensor's shape (tables show it in the learner's language).
SCALAR = "scalar"


def shape_text(shape: torch.Tensor | Iterable[int]) -> str:
    """A tensor's shape (or a shape: torch.Size, tuple, list) as text: "[2, 3]", "[0]", "scalar"."""
    if isinstance(shape, torch.Tensor):
        shape = shape.shape
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError(
            "shape_text() takes a tensor or a shape such as t.shape or (2, 3), "
            f"got {shape!r} ({type(shape).__name__})"
        )
    sizes = []
    for size in shape:
        if isinstance(size, bool) or not hasattr(type(size), "__index__"):
            raise TypeError(f"a shape holds whole numbers, got {size!r} in {shape!r}")
        sizes.append(operator.index(size))
    if not sizes:
        return SCALAR
    return "[" + ", ".join(str(s) for s in sizes) + "]"
