"""The memory an autograd graph holds: the tensors saved for backward, counted in exact bytes.

Two ways to look, which agree:

- `saved_in_graph(loss)` walks a graph that exists now and lists every saved tensor it still
  holds (`grad_fn._saved_*`), with the backward function and slot that saved it;
- `track_saved()` records, with `torch.autograd.graph.saved_tensors_hooks`, every tensor saved
  while it is active, and later tells which are still held (backward frees them) and how often
  backward read them.

Bytes are storage sizes (a view keeps its whole storage alive) and each storage counts once, so
the numbers are exact and the same on every machine: shape x dtype size, never a process reading.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from helpers.display import Table
from helpers.graph import autograd_graph
from helpers.language import say
from helpers.naming import named_tensors
from helpers.shapes import shape_text

__all__ = [
    "SavedTensor",
    "SavedTensorLog",
    "saved_in_graph",
    "saved_table",
    "saved_tensor_bytes",
    "track_saved",
    "unique_bytes",
]

GRAPH_ONLY = "graph only"


@dataclass(frozen=True)
class SavedTensor:
    """One tensor saved for backward: its shape, dtype, storage and who else holds that storage."""

    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # bytes of the whole storage
    storage: int  # 0, 1, 2, ...: equal numbers are one storage
    owner: str | None  # the known tensor (parameter, input) sharing the storage, if any
    function: str = ""  # the backward function that saved it (graph walks only)
    slot: str = ""  # the name it is saved under there, e.g. "mat1" (graph walks only)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _storage_of(t: torch.Tensor) -> tuple[int | None, int]:
    """(data pointer or None when it cannot be shared, storage bytes) of a tensor."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return None, t.nelement() * t.element_size()
    ptr = storage.data_ptr()
    return (ptr or None), storage.nbytes()


def _known_storages(known: object) -> dict[int, str]:
    """Map storage data pointer -> name, from any form `helpers.naming` accepts (a model's
    buffers count too: they are memory the graph may save)."""
    if known is None:
        return {}
    names: dict[int, str] = {}
    example = "e.g. known={'x': x, **dict(model.named_parameters())}"
    for name, value in named_tensors(known, "known", buffers=True, example=example).items():
        ptr, _ = _storage_of(value)
        if ptr is not None:
            names.setdefault(ptr, name)
    return names


def unique_bytes(saved: Iterable[SavedTensor], *, activations_only: bool = False) -> int:
    """Bytes of the distinct storages behind `saved`; with activations_only, unknown ones only."""
    sizes: dict[int, int] = {}
    for s in saved:
        if activations_only and s.owner is not None:
            continue
        sizes[s.storage] = s.nbytes
    return sum(sizes.values())


def saved_in_graph(*roots: torch.Tensor, known: object = None) -> list[SavedTensor]:
    """Every tensor the graph of `roots` still holds for backward (none once backward freed it).

    `known` names tensors held elsewhere anyway (parameters, inputs), in any form
    `helpers.naming` accepts: a model, a dict of name -> tensor, or model.named_parameters().
    Reading saved tensors runs any unpack hook, as backward would.
    """
    data = autograd_graph(*roots, show_saved=True)
    owners = _known_storages(known)
    labels = {n.id: n for n in data.nodes}
    ids: dict[int, int] = {}
    result = []
    for edge in data.edges:
        node = labels[edge.dst]
        if edge.style != "saved" or node.kind != "saved":
            continue
        tensor = data.objects[edge.dst]
        assert isinstance(tensor, torch.Tensor)
        ptr, nbytes = _storage_of(tensor)
        key = ptr if ptr is not None else -len(result) - 1
        storage = ids.setdefault(key, len(ids))
        result.append(
            SavedTensor(
                shape=tuple(tensor.shape),
                dtype=_dtype_name(tensor.dtype),
                nbytes=nbytes,
                storage=storage,
                owner=owners.get(ptr) if ptr is not None else None,
                function=labels[edge.src].label,
                slot=node.label.split("\n")[0],  # the graph has no names here: "slot\n[shape]"
            )
        )
    return result


def saved_table(saved: Iterable[SavedTensor], *, title: str | None = None) -> Table:
    """A table of saved tensors; 'new bytes' counts each storage once, so it sums to the total."""
    rows, seen = [], set()
    saved = list(saved)
    for s in saved:
        new = 0 if s.storage in seen else s.nbytes
        seen.add(s.storage)
        rows.append(
            {
                "saved by": s.function or "?",
                "slot": s.slot or "?",
                "shape": shape_text(s.shape),
                "dtype": s.dtype,
                "storage": f"#{s.storage}",
                "new bytes": f"{new:,}",
                "held by": s.owner or GRAPH_ONLY,
            }
        )
    total, only = unique_bytes(saved), unique_bytes(saved, activations_only=True)
    note = say(
        "common", "tables.memory_note", total=f"{total:,}", count=len(seen), only=f"{only:,}"
    )
    return Table(
        ["saved by", "slot", "shape", "dtype", "storage", "new bytes", "held by"],
        rows,
        title=title,
        note=note,
    )


class _Packed:
    """What the graph stores instead of a saved tensor while `track_saved` is active."""

    __slots__ = ("__weakref__", "index", "tensor")

    def __init__(self, index: int, tensor: torch.Tensor) -> None:
        self.index = index
        self.tensor = tensor


class SavedTensorLog:
    """Tensors saved for backward while `track_saved` was active, and which are still held."""

    def __init__(self, known: object = None) -> None:
        self.records: list[SavedTensor] = []
        #: how many times backward (or a `_saved_*` read) unpacked each record
        self.unpacks: list[int] = []
        self._owners = _known_storages(known)
        self._refs: list[weakref.ref[_Packed]] = []
        self._ptrs: list[int | None] = []

    def _storage_id(self, ptr: int | None, owner: str | None) -> int:
        # The same storage as a record still alive (it cannot have been reused) or as a known
        # tensor: same id. Otherwise a new id.
        ids = [r.storage for r in self.records]
        for i, (other_ptr, rec) in enumerate(zip(self._ptrs, self.records, strict=True)):
            same_owner = owner is not None and rec.owner == owner
            if same_owner or (ptr is not None and other_ptr == ptr and self.is_alive(i)):
                return rec.storage
        return max(ids, default=-1) + 1

    def pack(self, tensor: torch.Tensor) -> _Packed:
        """The pack hook: record the tensor, store a detached alias (no reference cycle)."""
        ptr, nbytes = _storage_of(tensor)
        owner = self._owners.get(ptr) if ptr is not None else None
        record = SavedTensor(
            shape=tuple(tensor.shape),
            dtype=_dtype_name(tensor.dtype),
            nbytes=nbytes,
            storage=self._storage_id(ptr, owner),
            owner=owner,
        )
        packed = _Packed(len(self.records), tensor.detach())
        self.records.append(record)
        self.unpacks.append(0)
        self._refs.append(weakref.ref(packed))
        self._ptrs.append(ptr)
        return packed

    def unpack(self, packed: _Packed) -> torch.Tensor:
        """The unpack hook: count the read, give the tensor back."""
        self.unpacks[packed.index] += 1
        return packed.tensor

    def is_alive(self, index: int) -> bool:
        """True while the graph still holds record `index` (backward without retain frees it)."""
        return self._refs[index]() is not None

    def alive(self) -> list[SavedTensor]:
        """The records the graph still holds."""
        return [r for i, r in enumerate(self.records) if self.is_alive(i)]

    def alive_bytes(self, *, activations_only: bool = False) -> int:
        """Bytes of the distinct storages the graph still holds."""
        return unique_bytes(self.alive(), activations_only=activations_only)

    def packed_bytes(self, *, activations_only: bool = False) -> int:
        """Bytes of the distinct storages saved while tracking, held or not."""
        return unique_bytes(self.records, activations_only=activations_only)


@contextmanager
def track_saved(known: object = None) -> Iterator[SavedTensorLog]:
    """Record every tensor saved for backward inside the block; the log stays live afterwards.

    `known` names tensors held elsewhere anyway (parameters, inputs), in any form
    `helpers.naming` accepts: a model, a dict of name -> tensor, or model.named_parameters().
    """
    log = SavedTensorLog(known)
    with torch.autograd.graph.saved_tensors_hooks(log.pack, log.unpack):
        yield log


def saved_tensor_bytes(fn: Callable[[], object], known: object = None) -> dict[str, int]:
    """Run `fn()` and count what its forward pass saved for backward, in exact bytes.

    Returns {'tensors': saved slots, 'storages': distinct storages, 'bytes': their bytes,
    'activation bytes': bytes of storages no `known` tensor holds}.
    """
    with track_saved(known) as log:
        fn()
    return {
        "tensors": len(log.records),
        "storages": len({r.storage for r in log.records}),
        "bytes": log.packed_bytes(),
        "activation bytes": log.packed_bytes(activations_only=True),
    }
