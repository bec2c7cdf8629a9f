"""Everything that runs in several processes: one launcher, 07's split and 07b's engines.

    launch              the one launcher: N ranks, one function each, a failing rank named
    cell_functions      a function written in a notebook cell, carried to the ranks as its source
    failures            which rank is at fault when a run fails or hangs (pure functions)
    split_ranks         what each of 07's three ranks runs: the wire and its part of a step
    split_run           07's run in three processes, and the same in one
    split_display       07's figures and tables, and its rank code shown with the wire tinted
    pipeline_ranks      what each pipeline stage runs under torch.distributed.pipelining
    data_parallel_ranks what each DistributedDataParallel rank runs
    pipeline_schedule   a schedule's time grid and its bubble
    schedule_display    07b's schedule, memory and bucket pictures
    python -m helpers.ranks split|pipeline|ddp   the same runs from a shell or under torchrun
"""
