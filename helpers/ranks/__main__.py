"""The course's multi-process runs from a shell: every rank here, or one rank under torchrun.

    python -m helpers.ranks split --steps 5              # 07: three processes, checked against one
    python -m helpers.ranks pipeline --schedule 1F1B     # 07b: torch.distributed.pipelining
    python -m helpers.ranks ddp                          # 07b: DistributedDataParallel
    torchrun --standalone --nproc-per-node 3 -m helpers.ranks split --steps 5
    torchrun --standalone --nproc-per-node 3 -m helpers.ranks pipeline
    torchrun --standalone --nproc-per-node 2 -m helpers.ranks ddp

Without torchrun, the launcher (`helpers.ranks.launch`) starts every rank on 127.0.0.1. Under
torchrun, on one machine or several, each process is one rank: torchrun sets RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT, which `init_process_group("gloo")` reads. Either way each result is
checked against one process: the split's losses and final parameters; each engine rank's
gradients (`check_stage`, `check_rank`), and for the pipeline's last stage its loss.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from helpers.ranks.launch import run_ranks

__all__ = ["ENGINES", "main"]

#: Engine name -> (module, rank function, its check, world size, roles).
ENGINES = {
    "pipeline": ("helpers.ranks.pipeline_ranks", "run_stage", "check_stage", 3, "ROLES"),
    "ddp": ("helpers.ranks.data_parallel_ranks", "run_data_parallel", "check_rank", 2, "DP_ROLES"),
}


def _split_under_torchrun(args: argparse.Namespace) -> int:
    """One rank of 07's split as torchrun started it, its messages summed up."""
    from helpers.ranks.split_ranks import ROLES, WORLD_SIZE, Wire, run_rank

    world = int(os.environ["WORLD_SIZE"])
    if world != WORLD_SIZE:
        print(
            f"split needs exactly {WORLD_SIZE} processes, got WORLD_SIZE={world}: use torchrun "
            "--nproc-per-node 3 (one machine) or --nnodes 3 --nproc-per-node 1",
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))  # env:// from torchrun
    rank = dist.get_rank()
    result = run_rank(rank, args.steps, Wire(rank, args.timeout))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        torch.save(result, Path(args.out) / f"rank{rank}.pt")
    sent = sum(r.nbytes for r in result.sent)
    got = sum(r.nbytes for r in result.received)
    print(
        f"[rank {rank}] {ROLES[rank]}: {args.steps} steps, "
        f"sent {len(result.sent)} messages ({sent} B), received {len(result.received)} ({got} B)",
        flush=True,
    )
    if rank == 2:
        print("[rank 2] losses: " + ", ".join(f"{v:.4f}" for v in result.losses), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _split_here(args: argparse.Namespace) -> int:
    """Start the three ranks of 07's split here and compare with the single-process run."""
    from helpers.ranks.split_display import wire_table
    from helpers.ranks.split_run import reference_run, run_distributed

    run = run_distributed(args.steps, timeout=args.timeout)
    losses, models = reference_run(args.steps)
    print(wire_table(run.wire, [1]))
    print()
    for step, (a, b) in enumerate(zip(losses, run.losses, strict=True), start=1):
        print(f"step {step}: loss {b:.4f} (three processes), {a:.4f} (one process)")
    torch.testing.assert_close(torch.tensor(run.losses), torch.tensor(losses))
    final = run.models().named_parameters()
    for name, p in models.named_parameters().items():
        torch.testing.assert_close(final[name], p)
    print("losses and final parameters equal the single-process run")
    return 0


def _engine(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run an engine's ranks and check each against one process; under torchrun, one rank."""
    module_name, run_name, check_name, world, roles_name = ENGINES[args.run]
    module = importlib.import_module(module_name)
    run, check = getattr(module, run_name), getattr(module, check_name)
    kwargs = {"schedule": args.schedule} if args.run == "pipeline" else {}
    if "RANK" in os.environ:  # torchrun started this process: it is one rank
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if size != world:
            parser.error(f"{args.run} needs --nproc-per-node {world} (one rank each)")
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
        try:
            print(check(rank, run(rank, size, **kwargs)), flush=True)
            dist.barrier()
        finally:
            dist.destroy_process_group()
        return 0
    done = run_ranks(run, world, roles=getattr(module, roles_name), kwargs=kwargs,
                     timeout=args.timeout)  # fmt: skip
    for rank, result in done.results.items():
        print(check(rank, result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.ranks RUN`: under torchrun one rank, else every rank here."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.ranks",
        description="The course's multi-process runs (gloo): 07's split, 07b's engines. Under "
        "torchrun, runs one rank; otherwise starts every rank on 127.0.0.1. Each result is "
        "checked against one process.",
    )
    parser.add_argument("run", choices=["split", *sorted(ENGINES)])
    parser.add_argument("--steps", type=int, default=5, help="split only: training steps")
    parser.add_argument("--schedule", default="GPipe", help="pipeline only: GPipe or 1F1B")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds any rank waits for another"
    )
    parser.add_argument("--out", help="split under torchrun: write each rank's result here")
    args = parser.parse_args(argv)
    if args.run == "split":
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            return _split_under_torchrun(args)
        return _split_here(args)
    return _engine(args, parser)


if __name__ == "__main__":
    sys.exit(main())
