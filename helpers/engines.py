"""PyTorch's engines from a shell: every rank here, or one rank under torchrun, each checked.

    python -m helpers.engines pipeline --schedule 1F1B    # three processes on 127.0.0.1
    python -m helpers.engines ddp                         # two processes
    torchrun --standalone --nproc-per-node 3 -m helpers.engines pipeline
    torchrun --standalone --nproc-per-node 2 -m helpers.engines ddp

Each rank's result is checked against one process (`check_stage`, `check_rank`): the same
gradients, and for the pipeline's last stage the same loss. Under torchrun, on one machine or
several, each process is one rank: torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT,
which `init_process_group("gloo")` reads, and each rank checks its own part.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from datetime import timedelta

import torch.distributed as dist

from helpers.engine_runs import run_ranks

__all__ = ["ENGINES", "main"]

#: Engine name -> (module, rank function, its check, world size, roles).
ENGINES = {
    "pipeline": ("helpers.pipeline_ranks", "run_stage", "check_stage", 3, "ROLES"),
    "ddp": ("helpers.data_parallel_ranks", "run_data_parallel", "check_rank", 2, "DP_ROLES"),
}


def main(argv: list[str] | None = None) -> int:
    """Run an engine's ranks and check each against one process; under torchrun, one rank."""
    parser = argparse.ArgumentParser(description="PyTorch's engines on the post's models")
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("--schedule", default="GPipe", help="pipeline only: GPipe or 1F1B")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds any wait may take")
    args = parser.parse_args(argv)
    module_name, run_name, check_name, world, roles_name = ENGINES[args.engine]
    module = importlib.import_module(module_name)
    run, check = getattr(module, run_name), getattr(module, check_name)
    kwargs = {"schedule": args.schedule} if args.engine == "pipeline" else {}
    if "RANK" in os.environ:  # torchrun started this process: it is one rank
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if size != world:
            parser.error(f"{args.engine} needs --nproc-per-node {world} (one rank each)")
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


if __name__ == "__main__":
    sys.exit(main())
