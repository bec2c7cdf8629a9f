"""What each rank runs when PyTorch's pipelining engine trains the post's three models.

Notebook 07b cuts the post's three models into three `PipelineStage`s, one per process, and runs
one training step with a schedule (`ScheduleGPipe` or `Schedule1F1B`) over micro-batches: its
cell `pipeline_rank` is what each rank runs (`run_stage` here is the same with what torch 2.4
needs besides, for that release, the command line and the failure demo). The engine does the
hand-off of notebooks 06 and 07 itself; `record_stage` writes down, on each rank, what it did so
the notebook can check it against one process:

- the order in which the rank ran each micro-batch's forward (F) and backward (B);
- the bytes of activations saved for backward that it held after each of those (notebook 05's
  saved-tensor counter);
- every stage backward: the gradient that arrived for the stage's output, the gradient of the
  stage's input that it sends back, and the `torch.autograd.backward` call the engine made
  (caught by a hook on the engine's own `stage_backward`, not paraphrased);
- the bytes it sent, from the engine's own send operations;
- the parameters' gradients after the step, and the last stage's micro-batch losses.

Starting the processes is `helpers.ranks.launch`; drawing the result is
`helpers.ranks.schedule_display`.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import Tensor, nn

from helpers.language import say
from helpers.memory import track_saved
from helpers.ranks.launch import doing
from helpers.split import POST_SEED, SplitModels, build_models, cut, token_loss

__all__ = [
    "BATCH",
    "MICROBATCHES",
    "ROLES",
    "SCHEDULES",
    "STAGES",
    "StageRun",
    "check_stage",
    "engine_needs_repair",
    "handoff_reference",
    "joint_reference",
    "make_schedule",
    "old_pipelining",
    "pipeline_batch",
    "record_stage",
    "run_stage",
    "schedule_step",
    "stage_modules",
]

STAGES = 3
BATCH, MICROBATCHES = 8, 4
#: What each rank holds: its stage (one of the post's models), and the data only it has.
ROLES = {
    0: "stage 0: model 1 and the input",
    1: "stage 1: model 2",
    2: "stage 2: model 3 and the labels",
}
SCHEDULES = ("GPipe", "1F1B")
#: Who divided the micro-batches' summed gradients by their number (`StageRun.scaler`); what
#: `StageRun.scaled_by` says of each is `[scaled_by]` in 07b's text file.
SCALERS = ("engine", "nobody", "run_stage")
#: How `run_stage(fault=...)` makes its rank fail: raise an error, or hang without a word.
FAULT_MODES = ("raise", "hang")


def pipeline_batch(seed: int = 0, batch: int = BATCH) -> tuple[Tensor, Tensor]:
    """A batch of `batch` sequences of 5 token ids and their per-token class labels (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 10, (batch, 5), generator=gen)
    targets = torch.randint(0, 3, (batch, 5), generator=gen)
    return tokens, targets


def stage_modules(models: SplitModels) -> list[nn.Module]:
    """The three stages: model 1, model 2, and model 3's layer (the loss is the schedule's)."""
    return [models.model1, models.model2, models.model3.layer]


def _stage_names(stage: int) -> dict[str, str]:
    """A stage module's parameter names -> the names `SplitModels.named_parameters()` uses."""
    prefix = ["model1.", "model2.", "model3.layer."][stage]
    module = stage_modules(build_models())[stage]
    return {name: prefix + name for name, _ in module.named_parameters()}


def joint_reference(seed: int = POST_SEED, data_seed: int = 0) -> dict[str, Any]:
    """One process, no cut: the full batch's loss and gradients (the un-split backward)."""
    models = build_models(seed)
    tokens, targets = pipeline_batch(data_seed)
    loss = token_loss(models.model3.layer(models.model2(models.model1(tokens))), targets)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in models.named_parameters().items()}
    return {"loss": loss.item(), "grads": grads}


def handoff_reference(
    seed: int = POST_SEED, data_seed: int = 0, microbatches: int = MICROBATCHES
) -> list[dict[str, Tensor]]:
    """One process, notebook 06's hand-off on each micro-batch: the gradients that cross each cut.

    Per micro-batch: `loss.backward()`, then `f2.backward(ff2.grad)`, then `f1.backward(ff1.grad)`.
    """
    models = build_models(seed)
    tokens, targets = pipeline_batch(data_seed)
    crossed = []
    for x, t in zip(tokens.chunk(microbatches), targets.chunk(microbatches), strict=True):
        f1 = models.model1(x)
        ff1 = cut(f1)
        f2 = models.model2(ff1)
        ff2 = cut(f2)
        loss = token_loss(models.model3.layer(ff2), t)
        loss.backward()
        f2.backward(ff2.grad)
        f1.backward(ff1.grad)
        crossed.append({"ff2.grad": ff2.grad.clone(), "ff1.grad": ff1.grad.clone()})
    return crossed


@dataclass
class StageRun:
    """What one rank's stage did during one schedule step (see the module docstring)."""

    rank: int
    schedule: str
    actions: list[tuple[str, int]] = field(default_factory=list)
    activation_bytes: list[int] = field(default_factory=list)
    arrived: dict[int, Tensor | None] = field(default_factory=dict)
    sent_back: dict[int, Tensor | None] = field(default_factory=dict)
    backward_calls: list[dict[str, Any]] = field(default_factory=list)
    sent: list[tuple[str, int, int]] = field(default_factory=list)
    grads: dict[str, Tensor] = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)
    repaired: bool = False
    scaler: str = ""  # one of SCALERS

    @property
    def scaled_by(self) -> str:
        """Who divided the summed gradients by the number of micro-batches, in the learner's
        words ("the engine (scale_grads=True)")."""
        if not self.scaler:
            return ""
        return say("07b_pipeline_and_data_parallel", f"scaled_by.{self.scaler}")


def engine_needs_repair() -> bool:
    """True on releases whose pipelining keeps only one of gloo's send/receive handles.

    Before the fix for pytorch issue 132644 (PR 152938, 2025), `_batch_p2p` returned
    `batch_isend_irecv(ops).pop()`: with gloo, which returns one handle per operation, it waited
    for only the last, and a schedule that sends and receives in one batch (1F1B) hung.
    """
    from torch.distributed.pipelining import schedules

    return ".pop()" in inspect.getsource(schedules._batch_p2p)


class _AllHandles:
    """Several send/receive handles that wait as one (what the fixed `_batch_p2p` returns)."""

    def __init__(self, works: list[Any]) -> None:
        self.works = works

    def wait(self, *args: Any) -> bool:
        for work in self.works:
            work.wait(*args)
        return True


def _repair_engine() -> None:
    """On a release with the bug, make `_batch_p2p` wait for every handle."""
    from torch.distributed.pipelining import schedules

    def batch_p2p(p2p_ops: list[Any], desc: str | None = None) -> _AllHandles | None:
        return _AllHandles(dist.batch_isend_irecv(p2p_ops)) if p2p_ops else None

    schedules._batch_p2p = batch_p2p


def _example_input(rank: int, microbatch: int) -> torch.Tensor:
    """What a stage receives, for releases whose PipelineStage needs an example (2.4).

    The example of a received activation requires grad: that is what makes the engine call
    `requires_grad_()` on what arrives, notebook 06's cut on the receiving side.
    """
    if rank == 0:
        return torch.zeros(microbatch, 5, dtype=torch.long)
    return torch.zeros(microbatch, 5, 6, requires_grad=True)


def old_pipelining() -> bool:
    """True on torch 2.4, whose `PipelineStage` needs its shapes up front, whose schedules have no
    `scale_grads`, and whose 1F1B hangs over gloo (`engine_needs_repair`): there `run_stage`, which
    mends all three, runs in place of notebook 07b's `pipeline_rank`."""
    from torch.distributed.pipelining import PipelineStage

    needed = inspect.signature(PipelineStage).parameters["input_args"].default
    return needed is inspect.Parameter.empty


def make_schedule(
    module: nn.Module, rank: int, schedule: str, microbatches: int, scale_grads: bool = True
) -> tuple[Any, Any, bool]:
    """Rank `rank`'s stage, the schedule that runs it, and whether the schedule scales the
    gradients by the number of micro-batches itself (torch 2.4's schedules never do)."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    cpu = torch.device("cpu")
    if old_pipelining():
        microbatch = BATCH // microbatches  # torch 2.4: shapes up front, in and out
        out = torch.zeros(microbatch, 5, 3 if rank == STAGES - 1 else 6)
        example = _example_input(rank, microbatch)
        stage = PipelineStage(module, rank, STAGES, cpu, input_args=example, output_args=out)
    else:
        stage = PipelineStage(module, rank, STAGES, cpu)  # shapes found on the first step
    kind = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[schedule]
    if "scale_grads" in inspect.signature(kind).parameters:
        return stage, kind(stage, microbatches, token_loss, scale_grads=scale_grads), True
    return stage, kind(stage, microbatches, token_loss), False


def schedule_step(
    runner: Any, rank: int, tokens: Tensor, targets: Tensor, losses: list[Tensor]
) -> None:
    """One training step, as each rank calls it; the last stage's micro-batch losses go into
    `losses`."""
    if rank == 0:
        runner.step(tokens)  # the first stage feeds the input, cut into micro-batches
    elif rank == STAGES - 1:
        runner.step(target=targets, losses=losses)  # the last stage has the labels
    else:
        runner.step()  # a middle stage receives, computes and sends on


def _node(output: Any) -> Any:
    """The graph node a backward starts from: a tensor's grad_fn, or a GradientEdge's node
    (torch 2.15's stage backward passes edges of the outputs instead of the tensors)."""
    return output.node if hasattr(output, "node") else output.grad_fn


def _bind(function: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    return dict(inspect.signature(function).bind(*args, **kwargs).arguments)


def _copy(tensor: Tensor | None) -> Tensor | None:
    return None if tensor is None else tensor.detach().clone()


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _EngineSpy:
    """A hook on the engine's `stage_backward` and on the `torch.autograd.backward` inside it.

    Installed once per process while any rank records (ranks may be threads of one process, as
    in the in-process tests), and reporting to the rank whose thread made the call.
    """

    _lock = threading.Lock()
    _users = 0
    _originals: ClassVar[dict[str, Callable[..., Any]]] = {}
    _rank = threading.local()  # .recorder: this thread's _StageRecorder; .calls: its backward

    @classmethod
    @contextmanager
    def reporting_to(cls, recorder: _StageRecorder) -> Iterator[None]:
        import torch.distributed.pipelining.stage as stage_code

        with cls._lock:
            if cls._users == 0:
                cls._originals = {
                    "stage": stage_code.stage_backward,
                    "autograd": torch.autograd.backward,
                }
                stage_code.stage_backward = cls._stage_backward
                torch.autograd.backward = cls._autograd_backward
            cls._users += 1
        cls._rank.recorder = recorder
        try:
            yield
        finally:
            cls._rank.recorder = None
            with cls._lock:
                cls._users -= 1
                if cls._users == 0:
                    stage_code.stage_backward = cls._originals["stage"]
                    torch.autograd.backward = cls._originals["autograd"]

    @classmethod
    def _stage_backward(cls, *args: Any, **kwargs: Any) -> Any:
        engine_backward = cls._originals["stage"]
        recorder = getattr(cls._rank, "recorder", None)
        if recorder is None:  # a thread that is not recording
            return engine_backward(*args, **kwargs)
        cls._rank.calls = []
        try:
            result = engine_backward(*args, **kwargs)
        finally:
            calls, cls._rank.calls = cls._rank.calls, None
        recorder.stage_backward_ran(_bind(engine_backward, args, kwargs), result, calls)
        return result

    @classmethod
    def _autograd_backward(cls, tensors: Any, grad_tensors: Any = None, *rest: Any, **more: Any):
        calls = getattr(cls._rank, "calls", None)
        if calls is not None:
            calls.append((_as_list(tensors), _as_list(grad_tensors)))
        return cls._originals["autograd"](tensors, grad_tensors, *rest, **more)


class _StageRecorder:
    """Wraps one rank's stage so that every forward, backward and send is written down."""

    def __init__(self, record: StageRun, rank: int, fault: tuple | None) -> None:
        self.record, self.rank, self.fault = record, rank, fault
        self.microbatch = -1
        self.saved: Any = None  # the saved-tensor counter, set while the step runs

    def wrap(self, stage: Any) -> None:
        stage.forward_one_chunk = self._action("F", stage.forward_one_chunk)
        stage.backward_one_chunk = self._action("B", stage.backward_one_chunk)
        stage.get_fwd_send_ops = self._send_ops("activation", stage.get_fwd_send_ops)
        stage.get_bwd_send_ops = self._send_ops("gradient", stage.get_bwd_send_ops)

    def _action(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def action(chunk_id: int, *args: Any, **kwargs: Any) -> Any:
            self.microbatch = chunk_id
            verb = "forward" if kind == "F" else "backward"
            doing(f"computing the {verb} of micro-batch {chunk_id}")
            if self.fault is not None and tuple(self.fault[:3]) == (self.rank, kind, chunk_id):
                if self.fault[3] == "hang":
                    time.sleep(3600)
                raise RuntimeError(
                    f"injected failure on rank {self.rank} in the {verb} of {chunk_id}"
                )
            out = original(chunk_id, *args, **kwargs)
            self.record.actions.append((kind, chunk_id))
            self.record.activation_bytes.append(self.saved.alive_bytes(activations_only=True))
            doing("in the schedule, between computations (sending or receiving)")
            return out

        return action

    def _send_ops(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def send_ops(chunk_id: int) -> Any:
            ops = original(chunk_id)
            for op in ops or []:
                size = op.tensor.numel() * op.tensor.element_size()
                self.record.sent.append((kind, chunk_id, size))
            return ops

        return send_ops

    def stage_backward_ran(self, bound: dict[str, Any], result: Any, calls: list) -> None:
        """What one engine stage backward received, sent back, and asked autograd to do."""
        grads = _as_list(bound["output_grads"])
        outputs = _as_list(bound["stage_output"])
        for tensors, given in calls:
            self.record.backward_calls.append(
                {
                    "microbatch": self.microbatch,
                    "outputs": [type(_node(t)).__name__ for t in tensors],
                    "same outputs": all(
                        any(_node(t) is _node(o) for o in outputs) for t in tensors
                    ),
                    "same gradients": len(given) == len(grads)
                    and all(g is a for g, a in zip(given, grads, strict=True)),
                }
            )
        first = _as_list(result)[0]
        self.record.arrived[self.microbatch] = _copy(grads[0])
        self.record.sent_back[self.microbatch] = _copy(first)


@contextmanager
def record_stage(
    runner: Any, losses: list[Tensor], *, fault: tuple | None = None
) -> Iterator[StageRun]:
    """Write down what one rank's stage does while `runner` (its schedule) runs in the block.

    Yields the rank's StageRun, filled as the module docstring lists; after the block it also
    holds the stage's parameter gradients (named as in one process) and the micro-batch losses
    that the schedule put into `losses`. It changes nothing the engine computes. `fault` is
    run_stage's: a planned hang or error, for the failure demo.
    """
    stage = runner._stage  # the PipelineStage the schedule runs
    rank, module = stage.stage_index, stage.submod
    scales = getattr(runner, "scale_grads", None)  # None: torch 2.4's schedules never scale
    record = StageRun(rank, type(runner).__name__.removeprefix("Schedule"))
    record.repaired = engine_needs_repair()
    record.scaler = "engine" if scales else "nobody"  # run_stage mends torch 2.4's
    recorder = _StageRecorder(record, rank, fault)
    recorder.wrap(stage)
    with _EngineSpy.reporting_to(recorder), track_saved(known=module) as recorder.saved:
        yield record
    names = _stage_names(rank)
    record.grads = {names[n]: p.grad.detach().clone() for n, p in module.named_parameters()}
    record.losses = [loss.item() for loss in losses]


def run_stage(
    rank: int,
    world_size: int = STAGES,
    *,
    schedule: str = "GPipe",
    microbatches: int = MICROBATCHES,
    scale_grads: bool = True,
    seed: int = POST_SEED,
    data_seed: int = 0,
    fault: tuple[int, str, int, str] | None = None,
) -> StageRun:
    """One rank's stage for one training step of `schedule` over `microbatches` micro-batches.

    Every rank builds the three models from `seed` and keeps its own stage. Rank 0 feeds the
    tokens, rank 2 the labels. `fault=(1, "F", 2, "hang")` makes rank 1 hang (or "raise") when
    it starts the forward of micro-batch 2 ("B" for a backward). This is notebook 07b's
    `pipeline_rank`, with what torch 2.4 needs besides (shapes up front, a repaired engine, the
    gradients scaled by hand), for the command line, the failure demo and that release.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    if fault is not None and (len(fault) != 4 or fault[3] not in FAULT_MODES):
        raise ValueError(
            f"fault must be (rank, 'F' or 'B', micro-batch, one of {FAULT_MODES}), not {fault!r}"
        )
    if world_size != STAGES:
        raise ValueError(f"the post's models make {STAGES} stages, not {world_size}")
    doing("building its stage and schedule")
    repaired = engine_needs_repair()  # asked before the repair, which changes the answer
    if repaired:
        _repair_engine()
    module = stage_modules(build_models(seed))[rank]
    tokens, targets = pipeline_batch(data_seed)
    _, runner, engine_scales = make_schedule(module, rank, schedule, microbatches, scale_grads)
    losses: list[Tensor] = []
    with record_stage(runner, losses, fault=fault) as record:
        record.repaired = repaired
        schedule_step(runner, rank, tokens, targets, losses)
        if scale_grads and not engine_scales:  # what later releases' scale_grads=True does
            for p in module.parameters():
                p.grad.div_(microbatches)
            record.scaler = "run_stage"
    return record


def check_stage(rank: int, record: StageRun) -> str:
    """One rank's check against one process: its gradients (and, last, the loss) are the same.

    Raises AssertionError with the parameter that differs; returns a line saying what held.
    """
    reference = joint_reference()
    for name, grad in record.grads.items():
        if not torch.allclose(grad, reference["grads"][name], atol=1e-6):
            raise AssertionError(f"rank {rank}: {name}'s gradient differs from one process")
    said = f"rank {rank} ({ROLES[rank]}): {len(record.grads)} gradients equal one process"
    if record.losses:
        loss = sum(record.losses) / len(record.losses)
        if abs(loss - reference["loss"]) > 1e-6:
            raise AssertionError(f"rank {rank}: loss {loss} differs from one process")
        said += f"; loss {loss:.4f}"
    return said
