"""What each of the three ranks runs: the wire between them, and its part of one training step.

Rank 0 (the client) holds model 1 and the input, rank 1 holds model 2, rank 2 holds model 3 and
the labels. Forward, a rank sends its activation to the next rank; backward, it sends the gradient
of what it received back to the rank before (point-to-point `torch.distributed`, gloo). Notebook 07
prints these functions: they are the lesson. Starting the processes, collecting their results and
naming a rank that failed is the launcher's job (`helpers.ranks.launch`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from helpers.ranks.failures import PeerError
from helpers.split import POST_INPUT, POST_LABEL, POST_SEED, build_models, make_optimizers

__all__ = [
    "LR",
    "ROLES",
    "SHAPES",
    "WORLD_SIZE",
    "PeerError",
    "RankResult",
    "Wire",
    "WireRecord",
    "client_step",
    "label_step",
    "message_shapes",
    "middle_step",
    "run_rank",
]

WORLD_SIZE = 3
#: What each rank holds.
ROLES = {
    0: "client: model 1 and the input",
    1: "middle: model 2",
    2: "label holder: model 3 and the labels",
}
LR = 0.01
#: A message's name starts with its kind, and its kind says which way it goes.
_PHASES = {"activation": "forward", "gradient": "backward"}


def message_shapes(
    tokens_shape: tuple[int, ...] = (1, len(POST_INPUT[0])),
    dims: tuple[int, int, int, int] = (10, 6, 6, 3),
) -> dict[str, tuple[int, ...]]:
    """The shapes every rank agrees on in advance: `dist.recv` fills a buffer of a known shape."""
    _, width, width2, _ = dims
    return {"f1": (*tokens_shape, width), "f2": (*tokens_shape, width2)}


#: The agreed shapes of the post's one sequence: f1 and f2 are both [1, 5, 6].
SHAPES = message_shapes()


@dataclass(frozen=True)
class WireRecord:
    """One message between two ranks: when, which way, what, and its payload size."""

    step: int
    phase: str
    src: int
    dst: int
    what: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @property
    def direction(self) -> str:
        """'rank 0 → rank 1'."""
        return f"rank {self.src} → rank {self.dst}"

    def as_dict(self) -> dict[str, Any]:
        """Plain values only (what goes into the result files)."""
        return {**asdict(self), "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WireRecord:
        """The inverse of `as_dict`."""
        return cls(**{**d, "shape": tuple(d["shape"])})


class Wire:
    """One rank's end of the wire: point-to-point sends and receives, logged, with a timeout.

    A message's name says its kind and so its direction: an "activation ..." goes forward, a
    "gradient ..." backward. `status` says what the rank is doing (step, phase, doing, peer): a
    launcher reads it to tell a rank that waits for another from a rank that is stuck.
    """

    def __init__(self, rank: int, timeout: float = 30.0) -> None:
        self.rank = rank
        self.timeout = timeout
        #: What this rank is doing: the step, its phase, "computing" or the message it is
        #: exchanging, and the rank it is sending to or waiting for (`peer`, else None).
        self.status: dict[str, Any] = {
            "step": 0,
            "phase": "setup",
            "doing": "starting",
            "peer": None,
        }
        self.sent: list[WireRecord] = []
        self.received: list[WireRecord] = []

    def update(self, **status: Any) -> None:
        """Record what this rank is doing now."""
        self.status.update(status)

    def start_step(self, step: int) -> None:
        """Step `step` begins: its messages are logged under it, forward ones first."""
        self.update(step=step, phase="forward", doing="computing", peer=None)

    def send(self, tensor: Tensor, dst: int, what: str) -> None:
        """Send `tensor` to rank `dst`, waiting at most `timeout` s for `dst` to take it."""
        tensor = tensor.detach().contiguous()  # values only: no graph crosses the wire
        with self._talking(f"sending {what} to rank {dst}", dst, what):
            dist.isend(tensor, dst).wait(timedelta(seconds=self.timeout))
        self.sent.append(self._record(tensor, self.rank, dst, what))

    def recv(self, shape: tuple[int, ...], src: int, what: str) -> Tensor:
        """Receive a float32 tensor of known `shape` from rank `src`; wait at most `timeout` s."""
        buffer = torch.empty(shape)  # recv fills a buffer: the shape must be known beforehand
        with self._talking(f"waiting for {what} from rank {src}", src, what):
            dist.irecv(buffer, src).wait(timedelta(seconds=self.timeout))
        self.received.append(self._record(buffer, src, self.rank, what))
        return buffer

    def _record(self, tensor: Tensor, src: int, dst: int, what: str) -> WireRecord:
        return WireRecord(
            step=self.status["step"],
            phase=self.status["phase"],
            src=src,
            dst=dst,
            what=what,
            shape=tuple(tensor.shape),
            dtype=str(tensor.dtype).removeprefix("torch."),
            nbytes=tensor.numel() * tensor.element_size(),
        )

    @contextmanager
    def _talking(self, doing: str, peer: int, what: str) -> Iterator[None]:
        """Mark this rank as talking to `peer`; turn gloo's errors into a clear PeerError."""
        kind = what.split(" ", 1)[0]
        if kind not in _PHASES:
            raise ValueError(
                f"a message's name starts with 'activation' (forward) or 'gradient' (backward), "
                f"not {what!r}"
            )
        self.update(phase=_PHASES[kind], doing=doing, peer=peer)
        try:
            yield
        except RuntimeError as err:
            text = str(err)
            timed_out = "imed out" in text
            if timed_out:
                cause = f"no answer from rank {peer} within {self.timeout:g} s (timed out)"
            elif any(s in text for s in ("closed", "closure", "reset", "Broken pipe", "refused")):
                cause = f"rank {peer} closed the connection (it failed or exited)"
            else:
                cause = text.strip().splitlines()[0] if text.strip() else type(err).__name__
            raise PeerError(f"while {doing}: {cause}", peer, timed_out) from err
        self.update(doing="computing", peer=None)


def client_step(
    model: nn.Module, tokens: Tensor, wire: Wire
) -> None:
    """Rank 0's part of one step (model 1)."""
    f1 = model(tokens)
    wire.send(f1, 1, "activation f1")
    grad = wire.recv(SHAPES["f1"], 1, "gradient ff1.grad")
    f1.backward(grad)  # 06's hand-off


def middle_step(model: nn.Module, wire: Wire) -> None:
    """Rank 1's part of one step (model 2)."""
    ff1 = wire.recv(SHAPES["f1"], 0, "activation f1")
    ff1.requires_grad_(True)  # 06's cut
    f2 = model(ff1)
    wire.send(f2, 2, "activation f2")
    grad = wire.recv(SHAPES["f2"], 2, "gradient ff2.grad")
    f2.backward(grad)  # fills ff1.grad
    wire.send(ff1.grad, 0, "gradient ff1.grad")


def label_step(
    model: nn.Module, label: Tensor, wire: Wire
) -> float:
    """Rank 2's part of one step (model 3); its loss."""
    ff2 = wire.recv(SHAPES["f2"], 1, "activation f2")
    ff2.requires_grad_(True)  # 06's cut
    _, loss = model(ff2, label)
    loss.backward()  # fills ff2.grad
    wire.send(ff2.grad, 1, "gradient ff2.grad")
    return loss.item()


@dataclass
class RankResult:
    """What one rank ends with: its model's final state, its losses (rank 2), its wire log."""

    rank: int
    state_dict: dict[str, Tensor]
    losses: list[float] = field(default_factory=list)
    sent: list[WireRecord] = field(default_factory=list)
    received: list[WireRecord] = field(default_factory=list)


def run_rank(
    rank: int, steps: int, wire: Wire, *, seed: int = POST_SEED, lr: float = LR
) -> RankResult:
    """One rank's whole run, in a ready 3-rank process group: its model, then `steps` steps."""
    models = build_models(seed)  # all three, from one seed: the same weights on every rank ...
    model = models.as_list()[rank]  # ... and each rank keeps only its own
    optimizer = make_optimizers(models, lr)[rank]
    tokens = torch.tensor(POST_INPUT)  # only rank 0 uses the input
    label = torch.tensor(POST_LABEL)  # only rank 2 uses the labels
    losses = []
    for step in range(1, steps + 1):
        wire.start_step(step)
        optimizer.zero_grad()
        if rank == 0:
            client_step(model, tokens, wire)
        elif rank == 1:
            middle_step(model, wire)
        else:
            losses.append(label_step(model, label, wire))
        optimizer.step()  # each rank updates its own model only
    state = {name: t.detach().clone() for name, t in model.state_dict().items()}
    return RankResult(rank, state, losses, wire.sent, wire.received)
