"""Functions written in a notebook cell, run on the ranks (helpers.ranks.cell_functions): carried
as their source with the names they use, rebuilt on each rank, and refused with a clear message
when they use something that cannot cross to a new process.

A "cell" here is source compiled as IPython compiles a cell: into `__main__`, under a file name
that only linecache knows."""

from __future__ import annotations

import itertools
import linecache
import math
import textwrap

import pytest
import torch

from helpers.ranks.cell_functions import carry, is_cell_function, run_carried
from helpers.ranks.failures import DistributedRunError
from helpers.ranks.launch import run_ranks
from helpers.split import token_loss

_cells = itertools.count()


def cell(source: str, **notebook: object) -> dict[str, object]:
    """Run `source` as a notebook cell would, in a namespace holding `notebook`'s names."""
    source = textwrap.dedent(source)
    filename = f"<ipython-input-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", **notebook}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


RANK_CELL = """
def scaled(x):
    return x * SCALE

def rank_sum(rank, world_size, extra=0):
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t)  # 1 + 2 over two ranks
    n = sum(1 for _ in NAMES)  # a generator: code of its own, reading a global
    return {"sum": scaled(t) + extra, "pi": math.pi, "loss": token_loss.__name__, "n": n}
"""


def test_a_cell_function_runs_on_every_rank_with_the_names_it_uses():
    import torch.distributed as dist

    found = cell(RANK_CELL, torch=torch, dist=dist, math=math, token_loss=token_loss,
                 SCALE=10, NAMES=("a", "b"))  # fmt: skip
    results = run_ranks(found["rank_sum"], 2, kwargs={"extra": 1}).results
    for rank in (0, 1):
        assert torch.equal(results[rank]["sum"], torch.full((2,), 31.0))  # (1 + 2) * 10 + 1
        assert results[rank]["pi"] == math.pi
        assert results[rank]["loss"] == "token_loss"
        assert results[rank]["n"] == 2


def test_carry_sorts_the_names_by_how_they_cross():
    import torch.distributed as dist

    found = cell(RANK_CELL, torch=torch, dist=dist, math=math, token_loss=token_loss,
                 SCALE=10, NAMES=("a", "b"))  # fmt: skip
    carried = carry(found["rank_sum"])
    assert carried.name == "rank_sum"
    assert carried.modules == {"dist": "torch.distributed", "math": "math", "torch": "torch"}
    assert carried.imported == {"token_loss": ("helpers.split", "token_loss")}
    assert carried.values == {"NAMES": ("a", "b")}  # sum, float, ... are builtins: not carried
    assert list(carried.functions) == ["scaled"]
    assert carried.functions["scaled"].values == {"SCALE": 10}
    rebuilt = carried.rebuild()
    assert rebuilt is not found["rank_sum"] and rebuilt.__name__ == "rank_sum"
    assert torch.equal(carried.functions["scaled"].rebuild()(torch.ones(1)), torch.full((1,), 10.0))


FULL_CELL = """
def helper():
    return "from a cell"

def f(rank, world_size, k=K, **more):
    return rank, world_size, k, more, math.pi, token_loss.__name__, helper()
"""


def test_a_rank_rebuilds_every_kind_of_name_and_gets_its_arguments():
    found = cell(FULL_CELL, K=7, math=math, token_loss=token_loss)  # K: a default argument
    carried = carry(found["f"])
    assert run_carried(2, 3, carried=carried, extra=1) == (
        2, 3, 7, {"extra": 1}, math.pi, "token_loss", "from a cell"
    )  # fmt: skip
    assert carried.rebuild().__module__ == "__notebook__"  # rebuilt: not the kernel's


def test_a_traceback_on_the_rank_quotes_the_cells_line():
    import traceback

    found = cell("def broken(rank, world_size):\n    raise ValueError('boom')\n")
    with pytest.raises(ValueError) as err:
        run_carried(0, 1, carried=carry(found["broken"]))
    shown = "".join(traceback.format_exception(err.value))
    assert 'File "<notebook cell: broken>", line 2, in broken' in shown
    assert "raise ValueError('boom')" in shown


def test_a_tensor_from_the_notebook_is_named_with_what_to_do():
    found = cell("def f(rank, world_size):\n    return model(rank)\n", model=torch.nn.Linear(1, 1))
    with pytest.raises(TypeError) as err:
        run_ranks(found["f"], 2)
    message = str(err.value)
    assert message.startswith("f() uses 'model', a Linear made in the notebook.")
    assert "build 'model' inside f(), pass it in run_ranks(..., kwargs={...})" in message


def test_a_name_the_notebook_has_not_defined_says_which_cell_to_run():
    found = cell("def f(rank, world_size):\n    return helper_not_run_yet(rank)\n")
    with pytest.raises(NameError, match=r"f\(\) uses 'helper_not_run_yet', which the notebook"):
        carry(found["f"])


def test_an_error_inside_the_cell_function_names_it_and_quotes_its_line():
    found = cell("def broken(rank, world_size):\n    raise ValueError(f'boom on {rank}')\n")
    with pytest.raises(DistributedRunError) as err:
        run_ranks(found["broken"], 2, timeout=5, deadline=60)
    first = str(err.value).splitlines()[0]
    assert "failed while running broken(): ValueError: boom on" in first


def test_only_top_level_functions_of_a_cell_are_cell_functions():
    found = cell("def outer():\n    def inner():\n        pass\n    return inner\n")
    assert is_cell_function(found["outer"])
    assert not is_cell_function(found["outer"]())  # nested: its qualname holds <locals>
    assert not is_cell_function(token_loss)  # a module's: ranks import it by name
    assert not is_cell_function(cell("f = lambda rank, world_size: 0")["f"])
    with pytest.raises(TypeError, match="defined with def at the top level of a notebook cell"):
        carry(token_loss)
