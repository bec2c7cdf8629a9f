"""What a model holds that PyTorch never registered, so `model.parameters()` never yields it and
no optimizer built from it trains it: layers kept in a plain list, tuple or dict (not
`nn.ModuleList` / `nn.ModuleDict`), and tensors that require grad set as attributes (not
`nn.Parameter`). Each comes with the line of the model's `__init__` that made it.

    find_unregistered(model)   # [Unregistered("hidden[0].weight", ..., holder="list", ...), ...]

nn.Module registers what is assigned to it only when it is a Parameter, a Module or a buffer;
anything else is a plain attribute, whatever it holds.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import torch

from helpers.doctor.record import Location

#: The attributes every nn.Module has (its registries, hooks and flags): never the learner's.
_MODULE_OWN = frozenset(vars(torch.nn.Module()))


@dataclass(frozen=True)
class Unregistered:
    """A leaf that requires grad, held by the model but never registered with it."""

    name: str  # as model.named_parameters() would have named it: "hidden[0].weight", "scale"
    tensor: torch.Tensor
    holder: str  # what holds it: "list", "tuple", "dict" (of layers or tensors) or "tensor"
    attribute: str  # the attribute that holds it, as the learner wrote it: "self.hidden"
    fix: str  # what registers it: "nn.ModuleList", "nn.ModuleDict", "nn.ParameterList", ...
    made_at: Location | None  # the line of __init__ that assigned that attribute


def find_unregistered(model: torch.nn.Module) -> list[Unregistered]:
    """Every leaf that requires grad and that `model` or one of its modules holds in a plain
    attribute (directly, or inside layers of a plain list, tuple or dict), in attribute order;
    none that `model.parameters()` yields. A tensor reached twice is listed once."""
    registered = {id(p) for p in model.parameters()}
    found: list[Unregistered] = []
    seen: set[int] = set(registered)

    def add(name: str, tensor: torch.Tensor, holder: str, fix: str, module: torch.nn.Module,
            attr: str) -> None:  # fmt: skip
        if id(tensor) in seen or not (tensor.requires_grad and tensor.is_leaf):
            return
        seen.add(id(tensor))
        made_at = _assigned_at(module, attr)
        found.append(Unregistered(name, tensor, holder, f"self.{attr}", fix, made_at))

    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr in _MODULE_OWN:
                continue
            where = f"{prefix}.{attr}" if prefix else attr
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                add(where, value, "tensor", "nn.Parameter", module, attr)
            elif isinstance(value, (list, tuple, dict)):
                holder = next(k.__name__ for k in (dict, tuple, list) if isinstance(value, k))
                items = value.items() if isinstance(value, dict) else enumerate(value)
                for key, item in items:
                    slot = f"{where}[{key!r}]"  # hidden[0], gates['in']
                    if isinstance(item, torch.nn.Module):
                        fix = "nn.ModuleDict" if holder == "dict" else "nn.ModuleList"
                        for name, p in item.named_parameters():
                            add(f"{slot}.{name}", p, holder, fix, module, attr)
                    elif isinstance(item, torch.Tensor):
                        fix = "nn.ParameterDict" if holder == "dict" else "nn.ParameterList"
                        add(slot, item, holder, fix, module, attr)
    return found


def _assigned_at(module: torch.nn.Module, attr: str) -> Location | None:
    """The first line of the module's `__init__` (or of a base class's) that assigns or fills
    `self.<attr>`; None when the source cannot be read."""
    pattern = re.compile(rf"\bself\.{re.escape(attr)}\s*(=(?!=)|\+=|\.append\(|\.extend\(|\[)")
    for cls in type(module).__mro__:
        init = vars(cls).get("__init__")
        code = getattr(init, "__code__", None)
        if code is None:
            continue
        try:
            lines, first = inspect.getsourcelines(init)
        except (OSError, TypeError):
            continue
        for offset, line in enumerate(lines):
            if pattern.search(line):
                return Location(code.co_filename, first + offset, "__init__")
    return None
