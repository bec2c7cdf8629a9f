"""Checkers for notebook 07b's exercises: a stage's backward split as zero-bubble schedules split
it, and data parallelism's average written as an autograd hook.

`check_input_then_weights(input_then_weights)` calls the learner's
`input_then_weights(output, grad, received, weights)` on a stage like model 2 (two linear layers
on a received activation). It must return `(input_grad, finish)`: the gradient for `received`,
computed without writing any weight's `.grad`, and a function that then accumulates the weights'
gradients. Both must equal what one full `output.backward(grad)` gives, and the first part must
compute no weight's gradient at all: tensor hooks on the weights and on `received` see which
gradients each part computes, by backward or by `torch.autograd.grad`, stored or not. For the
usual mistakes (a full backward in the first part, every gradient computed there and only stored
by `finish`, the weights first, a freed graph, `torch.autograd.grad` where `.grad` must be filled,
its tuple not unpacked, a gradient of ones or a negated one, the input's gradient computed again
in `finish`) it says which one it saw.

`check_average_hook(average)` registers the learner's `average(p)` as a post-accumulate-grad hook
on every parameter of the post's three models on two real ranks (processes, as the notebook's
DDP), each with half the batch. After backward every rank's `.grad` must be the whole batch's
gradient. For the usual mistakes (a sum, a division p.grad never gets, a division done twice or by
the rank's number, no all-reduce, a reduced copy, `dist.reduce` to one rank, the weights reduced
instead of their gradients, a value returned or an all-reduce never waited for, a name from the
notebook the ranks do not know, a rank that skips the all-reduce) it says which one it saw, from
the ranks' gradients and the hook's source. Neither checker raises.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from helpers.checks import (
    CheckResult,
    clean_message,
    error_line,
    feedback,
    only_a_placeholder,
)
from helpers.language import say

__all__ = ["average_hook_rank", "check_average_hook", "check_input_then_weights", "stage_case"]

#: The notebook whose text file holds this module's messages ([feedback] there).
TEXT = "07b_pipeline_and_data_parallel"


def stage_case(seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A stage (two linear layers), what arrived from the previous stage, the gradient that came
    back from the next one: all seeded."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    stage = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6))
    received = torch.randn(4, 6, generator=gen)
    grad = torch.randn(4, 6, generator=gen)
    return stage, received, grad


def _reference(seed: int, ones: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The gradients one full backward gives: for the gradient that came back, or (`ones`) for
    a gradient of ones, what `output.sum().backward()` gives."""
    stage, received, grad = stage_case(seed)
    received.requires_grad_(True)
    stage(received).backward(torch.ones_like(grad) if ones else grad)
    return received.grad, [p.grad for p in stage.parameters()]


def _close(a: object, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def _input_grad_problem(input_grad: object, finish: object, seed: int, grad: torch.Tensor) -> str:
    """What the learner's input_grad is, when it is not the gradient of received."""
    want, _ = _reference(seed)
    if input_grad is None:
        return say(TEXT, "feedback.input_grad_none")
    if callable(input_grad) and isinstance(finish, torch.Tensor):
        return say(TEXT, "feedback.pair_reversed")
    one = isinstance(input_grad, tuple | list) and len(input_grad) == 1
    if one and _close(input_grad[0], want):
        return say(TEXT, "feedback.input_grad_tuple", type=type(input_grad).__name__)
    if isinstance(input_grad, torch.Tensor):
        if _close(input_grad, grad):
            return say(TEXT, "feedback.gave_back_grad")
        if _close(input_grad, -want):
            return say(TEXT, "feedback.input_grad_negated")
        if _close(input_grad, _reference(seed, ones=True)[0]):
            return say(TEXT, "feedback.input_grad_ones")
    return say(TEXT, "feedback.wrong_input_grad")


def _check(split: Callable, seed: int) -> list[str]:
    want_input, want_weights = _reference(seed)
    stage, received, grad = stage_case(seed)
    received.requires_grad_(True)
    output = stage(received)
    weights = list(stage.parameters())
    # Which gradients each part computes, seen by tensor hooks: they run whenever autograd
    # computes that tensor's gradient, by backward() or by torch.autograd.grad, .grad or not.
    part = ["first"]
    computed: dict[str, set[str]] = {"first": set(), "finish": set()}
    received.register_hook(lambda g: computed[part[0]].add("received"))
    for p in weights:
        p.register_hook(lambda g: computed[part[0]].add("weights"))
    try:
        got = split(output, grad, received, weights)
    except Exception as err:  # the learner's code may fail in any way
        return [say(TEXT, "feedback.raised", error=error_line(err))]
    if got is Ellipsis or got is None:
        return [say(TEXT, "feedback.returns_nothing")]
    if not (isinstance(got, tuple) and len(got) == 2):
        return [say(TEXT, "feedback.not_a_pair", type=type(got).__name__)]
    input_grad, finish = got
    if "weights" in computed["first"] or any(p.grad is not None for p in weights):
        if "received" not in computed["first"]:
            return [say(TEXT, "feedback.weights_first")]
        if any(p.grad is not None for p in weights):
            return [say(TEXT, "feedback.weights_too_early")]
        return [say(TEXT, "feedback.weights_computed_early")]
    if not _close(input_grad, want_input):
        return [_input_grad_problem(input_grad, finish, seed, grad)]
    if not callable(finish):
        return [say(TEXT, "feedback.finish_not_callable", type=type(finish).__name__)]
    before = None if received.grad is None else received.grad.clone()
    # A pipeline runs finish() once per micro-batch into the same .grad: give each weight an
    # earlier micro-batch's gradient, which finish() must add to, not replace.
    earlier = [torch.full_like(p, 0.5) for p in weights]
    for p, g in zip(weights, earlier, strict=True):
        p.grad = g.clone()
    part[0] = "finish"
    try:
        finish()
    except RuntimeError as err:
        if "second time" in str(err):
            return [say(TEXT, "feedback.graph_freed")]
        return [say(TEXT, "feedback.finish_raised", error=error_line(err))]
    except Exception as err:
        return [say(TEXT, "feedback.finish_raised", error=error_line(err))]
    if any(p.grad is None for p in weights) or all(
        torch.equal(p.grad, e) for p, e in zip(weights, earlier, strict=True)
    ):
        return [say(TEXT, "feedback.weights_not_filled")]
    pairs = list(zip(weights, want_weights, earlier, strict=True))
    if not all(_close(p.grad, w + e) for p, w, e in pairs):
        if all(_close(p.grad, w) for p, w, _ in pairs):
            return [say(TEXT, "feedback.finish_replaced")]
        ones = _reference(seed, ones=True)[1]
        if all(_close(p.grad, w + e) for (p, _, e), w in zip(pairs, ones, strict=True)):
            return [say(TEXT, "feedback.weights_ones")]
        return [say(TEXT, "feedback.wrong_weight_grads")]
    after = received.grad
    if after is not None and (before is None or not torch.equal(after, before)):
        return [say(TEXT, "feedback.input_again")]
    return []


def check_input_then_weights(split: Callable) -> CheckResult:
    """Check `split(output, grad, received, weights) -> (input_grad, finish)` on two stages."""
    if split is Ellipsis:
        return feedback([say(TEXT, "feedback.unfilled")])
    if not callable(split):
        return feedback([say(TEXT, "feedback.not_function", type=type(split).__name__)])
    for seed in (0, 1):
        problems = _check(split, seed)
        if problems:
            return feedback(problems)
    return feedback([], success=say(TEXT, "feedback.success"))


#: What the learner's hook may use on a rank: the ranks run its source alone, not the notebook.
HOOK_NAMES = {"torch": torch, "dist": dist, "nn": nn}


def average_hook_rank(rank: int, world_size: int, *, source: str, name: str) -> dict[str, Any]:
    """One rank of check_average_hook: the learner's hook on every parameter, one backward on the
    rank's half of the batch; the gradients, and whether a weight changed."""
    from helpers.ranks.data_parallel_ranks import PostModel, gradients_of, half_batch
    from helpers.ranks.launch import doing
    from helpers.split import token_loss

    namespace = dict(HOOK_NAMES)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), namespace)  # the learner's def
    hook = namespace[name]
    model = PostModel()
    before = [p.detach().clone() for p in model.parameters()]
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    tokens, targets = half_batch(rank)
    doing(f"computing the backward, with {name}(p) on every parameter")
    token_loss(model(tokens), targets).backward()
    moved = any(not torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    return {"grads": gradients_of(model), "weights changed": moved}


def _hook_failure(err: Any, average: Callable) -> str:
    """What a failed run of the learner's hook says: a rank's own error, or a rank left waiting."""
    from helpers.ranks.failures import is_symptom

    own = [r for r in err.reports.values() if r["status"] == "error" and not is_symptom(r)]
    if not own:  # only timeouts and closed connections: a rank skipped a collective, or hung
        return say(TEXT, "feedback.hook_hung")
    first = own[0]
    lines = clean_message(first["message"]).splitlines()
    error = f"{first['type']}: {lines[0] if lines else ''}"
    if first["type"] == "NameError":
        return say(TEXT, "feedback.hook_name", error=error)
    if "post accumulate grad hooks should return None" in first["message"]:
        return say(TEXT, "feedback.hook_returned", error=error)
    if first["type"] == "TypeError":
        calls = _calls(average)
        if "NoneType" in first["message"] and "all_reduce" in calls.used:
            return say(TEXT, "feedback.hook_result_none", error=error)
        if "'function'" in first["message"] and "get_world_size" in calls.uncalled:
            return say(TEXT, "feedback.hook_not_called", error=error)
    return say(TEXT, "feedback.hook_raised", error=error)


class _Calls:
    """What a function's source does with the functions it names: `used`, the names of calls
    whose result goes into an expression or a name (`x = f(...)`, `f(...) / 2`); `uncalled`,
    names written without a call (`/ dist.get_world_size`); `called`, every name called;
    `lost`, the statements that compute a scaled tensor and drop it or bind it to a plain name
    (`p.grad / n`, `p.grad.div(n)`, `g = g / n`), as their source; `async_unwaited`, whether a
    collective is started with async_op=True and nothing is ever waited for."""

    def __init__(self, tree: ast.AST) -> None:
        self.used: set[str] = set()
        self.uncalled: set[str] = set()
        self.called: set[str] = set()
        self.lost: list[str] = []
        funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        dropped = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            name = getattr(node, "attr", getattr(node, "id", None))
            if isinstance(node, ast.Call):
                called = getattr(node.func, "attr", getattr(node.func, "id", ""))
                self.called.add(called)
                if id(node) not in dropped:
                    self.used.add(called)
            elif isinstance(node, ast.Attribute | ast.Name) and id(node) not in funcs and name:
                self.uncalled.add(name)
            if isinstance(node, ast.Expr) and _scales(node.value):
                self.lost.append(ast.unparse(node))
            if isinstance(node, ast.Assign) and _scales(node.value):
                if all(isinstance(t, ast.Name) for t in node.targets):
                    self.lost.append(ast.unparse(node))
        started = any(
            isinstance(n, ast.Call) and any(
                k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in n.keywords)
            for n in ast.walk(tree)
        )  # fmt: skip
        self.async_unwaited = started and "wait" not in self.called


def _scales(node: ast.AST) -> bool:
    """An expression that makes a new, divided or multiplied tensor: `t / n`, `t.div(n)`."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div | ast.Mult)
    return isinstance(node, ast.Call) and getattr(node.func, "attr", "") in {
        "div", "divide", "mul", "multiply", "true_divide"}  # fmt: skip


def _calls(function: Callable) -> _Calls:
    return _Calls(ast.parse(textwrap.dedent(inspect.getsource(function))))


def _reduced_arguments(function: Callable) -> list[str]:
    """The source text of what the function passes to all_reduce, call by call."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return [
        ast.unparse(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "all_reduce"
    ]  # fmt: skip


def _world_size_written_in(average: Callable, world: int) -> str | None:
    """The right average on `world` ranks can still be wrong on any other number of ranks: a
    hook that divides by the number itself (`/ 2`, `* 0.5`, `.div_(2)`) instead of asking
    dist.get_world_size()."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(average)))
    written = {world, 1 / world}

    def constant(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in written and node.value is not True

    for node in ast.walk(tree):
        scales = isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(
            node.op, ast.Div | ast.Mult
        )
        if isinstance(node, ast.AugAssign) and scales and constant(node.value):
            return say(TEXT, "feedback.hook_world_written", world=world)
        if isinstance(node, ast.BinOp) and scales and (constant(node.right) or constant(node.left)):
            return say(TEXT, "feedback.hook_world_written", world=world)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in METHODS_THAT_SCALE:
            if any(constant(a) for a in node.args):
                return say(TEXT, "feedback.hook_world_written", world=world)
    return None


#: Tensor methods that divide or multiply by their argument.
METHODS_THAT_SCALE = {"div", "div_", "divide", "divide_", "mul", "mul_", "multiply", "multiply_"}


def _local_grads(rank: int) -> dict[str, torch.Tensor | None]:
    """One process: the gradients of rank `rank`'s half alone (what a rank has before averaging)."""
    from helpers.ranks.data_parallel_ranks import PostModel, gradients_of, half_batch
    from helpers.split import token_loss

    model = PostModel()
    tokens, targets = half_batch(rank)
    token_loss(model(tokens), targets).backward()
    return gradients_of(model)


def _average_verdict(results: dict[int, dict[str, Any]], average: Callable) -> str | None:
    """None when every rank holds the whole batch's gradient; else what went wrong."""
    from helpers.ranks.data_parallel_ranks import full_batch_grads

    if any(r["weights changed"] for r in results.values()):
        return say(TEXT, "feedback.hook_moved")
    full = full_batch_grads()
    local = {rank: _local_grads(rank) for rank in results}

    def every_rank_holds(factor: float, want: Callable[[int], dict]) -> bool:
        return all(
            _close(results[rank]["grads"][n], factor * g)
            for rank in results
            for n, g in want(rank).items()
        )

    world = len(results)
    calls = _calls(average)
    if every_rank_holds(1.0, lambda rank: full):
        return _world_size_written_in(average, world)
    if every_rank_holds(2.0, lambda rank: full):
        if calls.lost:  # it divided, but into a tensor p.grad never got
            return say(TEXT, "feedback.hook_division_lost", code=calls.lost[0])
        return say(TEXT, "feedback.hook_summed")
    if every_rank_holds(1.0 / world, lambda rank: full):
        return say(TEXT, "feedback.hook_divided_twice", world=world)
    first_right = all(_close(results[0]["grads"][n], g) for n, g in full.items())
    if first_right and "reduce" in calls.called:
        return say(TEXT, "feedback.hook_reduce_one")
    if "get_rank" in calls.called:
        return say(TEXT, "feedback.hook_rank")
    if any(every_rank_holds(f, lambda rank: local[rank]) for f in (1.0, 1.0 / len(results))):
        reduced = _reduced_arguments(average)  # each rank kept its own half: why?
        if not reduced:
            return say(TEXT, "feedback.hook_no_reduce")
        param = next(iter(inspect.signature(average).parameters), "p")  # what the hook calls p
        if any(a.split(".")[0] == param and not a.startswith(f"{param}.grad") for a in reduced):
            return say(TEXT, "feedback.hook_weights")
        return say(TEXT, "feedback.hook_copy", reduced=reduced[0])
    return say(TEXT, "feedback.hook_wrong")


def check_average_hook(average: Callable) -> CheckResult:
    """Check the learner's `average(p)` hook on two ranks (see the module docstring)."""
    from helpers.ranks.data_parallel_ranks import DP_ROLES, DP_WORLD
    from helpers.ranks.failures import DistributedRunError
    from helpers.ranks.launch import run_ranks

    if average is Ellipsis:
        return feedback([say(TEXT, "feedback.hook_unfilled")])
    if not callable(average):
        return feedback([say(TEXT, "feedback.hook_not_function", type=type(average).__name__)])
    name = getattr(average, "__name__", "")
    try:
        source = inspect.getsource(average)
    except (OSError, TypeError):
        source = ""
    if not name.isidentifier() or not source.lstrip().startswith("def "):
        return feedback([say(TEXT, "feedback.hook_not_def")])
    if only_a_placeholder(average):
        return feedback([say(TEXT, "feedback.hook_unfilled")])
    if _calls(average).async_unwaited:  # a race: its result depends on timing, so not run
        return feedback([say(TEXT, "feedback.hook_async")])
    kwargs = {"source": source, "name": name}
    try:
        run = run_ranks(average_hook_rank, DP_WORLD, roles=DP_ROLES, kwargs=kwargs,
                        timeout=5, deadline=60)  # fmt: skip
    except DistributedRunError as err:
        return feedback([_hook_failure(err, average)])
    problem = _average_verdict(run.results, average)
    return feedback([problem] if problem else [], success=say(TEXT, "feedback.hook_success"))
