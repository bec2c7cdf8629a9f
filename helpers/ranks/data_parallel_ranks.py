"""What each rank runs when DistributedDataParallel trains the post's three models on half a batch.

Data parallelism splits the batch, not the model: every rank holds all three models and a share
of the examples, and after backward the ranks average their gradients. Notebook 07b runs two
ranks; `run_data_parallel` does on each, and records:

- "local": the gradients of the rank's own half, before any averaging;
- "ddp": the gradients after one DDP backward, and per step, what each of DDP's all-reduces
  carried (a communication hook records each bucket: its index, its parameters, its bytes);
- "by hand": the same average written with autograd hooks: `register_post_accumulate_grad_hook`
  on every parameter calls `all_reduce` as soon as that parameter's gradient is accumulated;
- "no_sync": two micro-batches per rank, the first under `no_sync()` (no all-reduce), the
  second synchronised: gradient accumulation across ranks;
- "unused": a model with a layer that forward never calls, two steps without
  `find_unused_parameters` (the second fails) and two with it.

The one-process references (`full_batch_grads`, ...) are here too, so the notebook compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from helpers.ranks.launch import doing
from helpers.ranks.pipeline_ranks import pipeline_batch
from helpers.split import POST_SEED, build_models, token_loss

__all__ = [
    "DP_ROLES",
    "DP_WORLD",
    "PostModel",
    "accumulated_grads",
    "average_by_hand",
    "check_rank",
    "full_batch_grads",
    "gradients_of",
    "half_batch",
    "run_data_parallel",
]

DP_WORLD = 2
DP_ROLES = {0: "data-parallel rank 0: examples 0-3", 1: "data-parallel rank 1: examples 4-7"}
#: DDP's bucket size for the run, in MB: small, so the post's tiny models fill several buckets.
BUCKET_MB = 0.0003


class PostModel(nn.Module):
    """The post's three models as one module (no cut): what each data-parallel rank holds."""

    def __init__(self, seed: int = POST_SEED, unused_layer: bool = False) -> None:
        super().__init__()
        models = build_models(seed)
        self.model1, self.model2, self.model3 = models.model1, models.model2, models.model3.layer
        if unused_layer:  # built, never called: it never gets a gradient
            self.unused = nn.Linear(6, 6)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.model3(self.model2(self.model1(tokens)))


def gradients_of(model: nn.Module) -> dict[str, Tensor | None]:
    """Each parameter's gradient by name (a copy; None where there is none), DDP's `module.`
    prefix dropped so that a wrapped model's names are the plain model's."""
    prefix = "module."
    return {
        name.removeprefix(prefix): None if p.grad is None else p.grad.detach().clone()
        for name, p in model.named_parameters()
    }


def half_batch(rank: int, data_seed: int = 0) -> tuple[Tensor, Tensor]:
    """Rank `rank`'s share of the batch: half the examples, in order."""
    tokens, targets = pipeline_batch(data_seed)
    return tokens.chunk(DP_WORLD)[rank], targets.chunk(DP_WORLD)[rank]


def full_batch_grads(seed: int = POST_SEED, data_seed: int = 0) -> dict[str, Tensor | None]:
    """One process: the gradients of the whole batch's mean loss."""
    model = PostModel(seed)
    tokens, targets = pipeline_batch(data_seed)
    token_loss(model(tokens), targets).backward()
    return gradients_of(model)


def accumulated_grads(seed: int = POST_SEED, data_seed: int = 0) -> dict[str, Tensor | None]:
    """One process: the mean loss of a batch twice as large (the batch, then a second one)."""
    model = PostModel(seed)
    tokens, targets = pipeline_batch(data_seed)
    more_tokens, more_targets = pipeline_batch(data_seed + 1)
    big = token_loss(model(torch.cat([tokens, more_tokens])), torch.cat([targets, more_targets]))
    big.backward()
    return gradients_of(model)


def _bucket_recorder(names: dict[int, str], log: list[dict[str, Any]]) -> Callable[..., Any]:
    """A DDP communication hook: write down what this all-reduce carries, then do DDP's own."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(process_group, bucket):  # no annotations: DDP checks the ones it finds
        buffer = bucket.buffer()
        log.append(
            {
                "bucket": bucket.index(),
                "parameters": [names[id(p)] for p in bucket.parameters()],
                "numbers": buffer.numel(),
                "bytes": buffer.numel() * buffer.element_size(),
            }
        )
        return allreduce_hook(process_group, bucket)

    return hook


def _ddp_part(rank: int, seed: int, data_seed: int, steps: int) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = PostModel(seed)
    names = {id(p): n for n, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB)
    buckets: list[list[dict[str, Any]]] = []
    ddp.register_comm_hook(None, _bucket_recorder(names, log := []))
    tokens, targets = half_batch(rank, data_seed)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    first: dict[str, Tensor | None] = {}
    for step in range(steps):
        doing(f"computing DDP step {step + 1}")
        optimizer.zero_grad()
        token_loss(ddp(tokens), targets).backward()  # the all-reduces run inside backward
        buckets.append(list(log))
        log.clear()
        if step == 0:
            first = gradients_of(ddp)
        optimizer.step()
    return {"ddp": first, "buckets": buckets}


def average_by_hand(rank: int, seed: int, data_seed: int, world_size: int) -> dict[str, Any]:
    """Data parallelism in a few lines: average each gradient as soon as autograd has it."""
    model = PostModel(seed)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)  # every rank starts from rank 0's weights (DDP does too)
    order = []

    def average(p: Tensor) -> None:
        order.append(p)
        dist.all_reduce(p.grad)  # the sum over the ranks...
        p.grad /= world_size  # ...divided: the average

    names = {id(p): n for n, p in model.named_parameters()}
    handles = [p.register_post_accumulate_grad_hook(average) for p in model.parameters()]
    tokens, targets = half_batch(rank, data_seed)
    doing("computing the hand-written data-parallel backward")
    token_loss(model(tokens), targets).backward()
    for handle in handles:
        handle.remove()
    return {"by hand": gradients_of(model), "hook order": [names[id(p)] for p in order]}


def _no_sync(rank: int, seed: int, data_seed: int) -> dict[str, Tensor | None]:
    """Two micro-batches per rank: the first under no_sync(), the second synchronised."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(PostModel(seed))
    parts = [half_batch(rank, data_seed), half_batch(rank, data_seed + 1)]
    doing("computing the accumulation under no_sync()")
    with ddp.no_sync():  # gradients accumulate locally; no all-reduce
        token_loss(ddp(parts[0][0]), parts[0][1]).div(2).backward()
    token_loss(ddp(parts[1][0]), parts[1][1]).div(2).backward()  # now DDP all-reduces the sum
    return gradients_of(ddp)


def _unused(rank: int, seed: int, data_seed: int) -> dict[str, Any]:
    """A layer forward never calls: DDP's error without find_unused_parameters, grads with it."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    tokens, targets = half_batch(rank, data_seed)
    strict = DDP(PostModel(seed, unused_layer=True))
    error = ""
    try:
        doing("computing two steps with an unused layer, without find_unused_parameters")
        for _ in range(2):  # the second forward finds the first reduction unfinished
            token_loss(strict(tokens), targets).backward()
    except RuntimeError as err:
        error = str(err).strip().splitlines()[0]
    dist.barrier()
    tolerant = DDP(PostModel(seed, unused_layer=True), find_unused_parameters=True)
    doing("computing two steps with an unused layer, with find_unused_parameters=True")
    for _ in range(2):  # the second forward, where the strict one failed, goes through
        tolerant.zero_grad()
        token_loss(tolerant(tokens), targets).backward()
    return {"error": error, "grads": gradients_of(tolerant)}


def run_data_parallel(
    rank: int,
    world_size: int = DP_WORLD,
    *,
    seed: int = POST_SEED,
    data_seed: int = 0,
    steps: int = 2,
) -> dict[str, Any]:
    """Everything notebook 07b runs on one data-parallel rank (see the module docstring)."""
    if world_size != DP_WORLD:
        raise ValueError(f"the batch is split in {DP_WORLD}, not {world_size}")
    doing("computing the gradients of its own half")
    local = PostModel(seed)
    tokens, targets = half_batch(rank, data_seed)
    token_loss(local(tokens), targets).backward()
    result: dict[str, Any] = {"local": gradients_of(local)}
    result.update(_ddp_part(rank, seed, data_seed, steps))
    result.update(average_by_hand(rank, seed, data_seed, world_size))
    result["no_sync"] = _no_sync(rank, seed, data_seed)
    result["unused"] = _unused(rank, seed, data_seed)
    return result


def check_rank(rank: int, result: dict[str, Any]) -> str:
    """One rank's check against one process: DDP's gradients are the whole batch's."""
    reference = full_batch_grads()
    for name, grad in result["ddp"].items():
        if grad is None or not torch.allclose(grad, reference[name], atol=1e-6):
            raise AssertionError(f"rank {rank}: {name}'s gradient differs from one process")
    return f"rank {rank} ({DP_ROLES[rank]}): {len(result['ddp'])} DDP gradients equal one process"
