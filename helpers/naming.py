"""One way to name tensors, for every helper that shows names (`show_graph`, `tensor_state`,
the saved-tensor counter, `snapshot` and `param_diff`): a model (its parameters' names), a dict
of name -> tensor, or `model.named_parameters()`.

    show_graph(loss, params=model)            tensor_state(model, x=x)
    saved_in_graph(loss, known={"x": x})      snapshot(model)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from helpers.language import article

__all__ = ["HOW", "a_type", "named_tensors"]

#: What every helper accepts as names, as its error messages say.
HOW = "a model (nn.Module), a dict of name -> tensor, or model.named_parameters()"


def named_tensors(
    obj: object, argument: str, *, buffers: bool = False, example: str = ""
) -> dict[str, torch.Tensor]:
    """Name -> tensor from a model (its parameters, and its buffers with `buffers=True`), a dict,
    or an iterable of (name, tensor) pairs or of tensors (named by position). `argument` names
    what the caller passed, and `example` shows a right call, in the error messages."""
    tail = f"; {example}" if example else ""
    if obj is None:
        raise TypeError(f"{argument} is None; pass {HOW}{tail}")
    if isinstance(obj, torch.nn.Module):
        result = dict(obj.named_parameters())
        if buffers:
            result.update(obj.named_buffers())
    elif isinstance(obj, Mapping):
        result = {str(k): v for k, v in obj.items()}
    elif isinstance(obj, torch.Tensor):
        result = {"tensor": obj}
    elif isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        items = list(obj)
        if all(isinstance(i, tuple) and len(i) == 2 for i in items):
            result = {str(k): v for k, v in items}
        else:
            result = {str(i): v for i, v in enumerate(items)}
    else:
        raise TypeError(f"{argument} is {a_type(obj)}; pass {HOW}{tail}")
    for name, value in result.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{argument}[{name!r}] is {a_type(value)}, not a tensor{tail}")
    return result


def a_type(value: object) -> str:
    """The name of `value`'s type with its English article, by sound (`helpers.language.article`):
    "an int", "a list", "a uint8", "an ndarray", "an MSELoss"."""
    name = type(value).__name__
    return f"{article(name)} {name}"
