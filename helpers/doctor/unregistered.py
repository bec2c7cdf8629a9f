"""What a model holds that PyTorch never registered, so `model.parameters()` never yields it and
no optimizer built from it trains it: layers kept in a plain list, tuple or dict (not
`nn.ModuleList` / `nn.ModuleDict`), at any depth (a list of lists), and tensors that require grad
set as attributes (not `nn.Parameter`): a leaf, or a tensor computed from a leaf that nothing else
holds (`torch.randn(1, requires_grad=True) * 0.1`). Each comes with the line of the model's
`__init__` that made it.

    find_unregistered(model)   # [Unregistered("hidden[0].weight", ..., holder="list", ...), ...]

nn.Module registers what is assigned to it only when it is a Parameter, a Module or a buffer;
anything else is a plain attribute, whatever it holds.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import torch

from helpers.doctor.record import Location, reach

#: The attributes every nn.Module has (its registries, hooks and flags): never the learner's.
_MODULE_OWN = frozenset(vars(torch.nn.Module()))
#: How deep plain containers are searched: deeper than any model nests them, and a container
#: that holds itself ends there.
_DEPTH = 8


@dataclass(frozen=True)
class Unregistered:
    """A tensor that requires grad, held by the model but never registered with it."""

    name: str  # as model.named_parameters() would have named it: "hidden[0].weight", "scale"
    tensor: torch.Tensor
    holder: str  # what holds it: "list", "tuple", "dict" (of layers or tensors) or "tensor"
    attribute: str  # the attribute that holds it, as the learner wrote it: "self.hidden"
    #: what registers it: "nn.ModuleList", "nn.ModuleDict", "nn.ParameterList", ...; for a plain
    #: container inside a plain container, the registered ones nested the same way:
    #: "nn.ModuleList([nn.ModuleList([...]), ...])"
    fix: str
    made_at: Location | None  # the line of __init__ that assigned that attribute
    #: not a leaf, but computed from a leaf that requires grad and that nothing else holds: the
    #: gradient goes on to that leaf, and no optimizer takes a tensor that is not a leaf
    computed: bool = False
    nested: bool = False  # in a plain container inside a plain container (a list of lists)


def find_unregistered(model: torch.nn.Module) -> list[Unregistered]:
    """Every tensor that requires grad and that `model` or one of its modules holds in a plain
    attribute (directly, or inside a plain list, tuple or dict at any depth, or in the layers
    such a container holds), in attribute order; none that `model.parameters()` yields. A leaf
    is listed; a tensor computed from leaves is listed when one of them requires grad and is
    neither registered nor listed itself (the leaf of `torch.randn(1, requires_grad=True) * 0.1`:
    the gradient goes on to it, and nothing holds it). A tensor reached twice is listed once."""
    registered = {id(p) for p in model.parameters()}
    found: list[Unregistered] = []
    seen: set[int] = set(registered)

    def add(name: str, tensor: torch.Tensor, holders: tuple[str, ...], layer: bool,
            module: torch.nn.Module, attr: str) -> None:  # fmt: skip
        if id(tensor) in seen or not tensor.requires_grad:
            return
        seen.add(id(tensor))
        holder = holders[0] if holders else "tensor"
        made_at = _assigned_at(module, attr)
        fix = _fix(holders, layer)
        computed, nested = not tensor.is_leaf, len(holders) > 1
        found.append(
            Unregistered(name, tensor, holder, f"self.{attr}", fix, made_at, computed, nested)
        )

    def walk(value: object, where: str, holders: tuple[str, ...], module: torch.nn.Module,
             attr: str) -> None:  # fmt: skip
        if isinstance(value, torch.nn.Module):  # a layer in a plain container
            for name, p in value.named_parameters():
                add(f"{where}.{name}", p, holders, True, module, attr)
        elif isinstance(value, torch.Tensor):
            add(where, value, holders, False, module, attr)
        elif isinstance(value, (list, tuple, dict)) and len(holders) < _DEPTH:
            holder = next(k.__name__ for k in (dict, tuple, list) if isinstance(value, k))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:  # hidden[0], gates['in'], blocks[1][0]
                walk(item, f"{where}[{key!r}]", (*holders, holder), module, attr)

    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr in _MODULE_OWN:
                continue
            walk(value, f"{prefix}.{attr}" if prefix else attr, (), module, attr)
    listed = {id(u.tensor) for u in found if not u.computed}
    cache: dict = {}
    return [
        u
        for u in found
        if not u.computed
        or any(leaf not in registered and leaf not in listed for leaf in reach(u.tensor, cache))
    ]


def _fix(holders: tuple[str, ...], layer: bool) -> str:
    """What registers a tensor held this way (`holders`: the plain containers, outermost first):
    `nn.Parameter` for a tensor attribute, the registered container for a plain one, and for
    containers in containers the registered ones nested the same way."""
    if not holders:
        return "nn.Parameter"
    kind = "Module" if layer else "Parameter"
    innermost = "Dict" if holders[-1] == "dict" else "List"
    if len(holders) == 1:
        return f"nn.{kind}{innermost}"
    fix = f"nn.{kind}Dict({{...}})" if innermost == "Dict" else f"nn.{kind}List([...])"
    for holder in reversed(holders[:-1]):  # each outer one holds containers: modules
        if holder == "dict":
            fix = f"nn.ModuleDict({{key: {fix}, ...}})"
        else:
            fix = f"nn.ModuleList([{fix}, ...])"
    return fix


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
