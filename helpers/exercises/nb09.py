"""Checkers for notebook 09 (past first order): a Hessian-vector product, a custom backward,
gradient checkpointing."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from helpers.checks import CheckResult, feedback
from helpers.language import say
from helpers.memory import track_saved
from helpers.shapes import shape_text

__all__ = ["check_checkpointed", "check_hvp", "check_softsign"]

F64 = torch.float64
#: The functions, points and directions on which a Hessian-vector product is checked.
HVP_CASES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], list[float], list[float]]] = [
    ("x0² x1 + x1³", lambda x: x[0] ** 2 * x[1] + x[1] ** 3, [1.0, 2.0], [1.0, -1.0]),
    (
        "sum(sin(x) · roll(x))",
        lambda x: (x.sin() * x.roll(1)).sum(),
        [0.5, -1.0, 2.0, 0.25],
        [1.0, 0.0, -2.0, 0.5],
    ),
]
#: Functions that build a whole Jacobian or Hessian: (module, attribute name).
BUILDERS = [
    (torch.autograd.functional, "hessian"),
    (torch.autograd.functional, "jacobian"),
    (torch.func, "hessian"),
    (torch.func, "jacrev"),
    (torch.func, "jacfwd"),
]
#: Points and incoming gradients on which a softsign backward is checked (no kink at 0 needed).
SOFTSIGN_X = [-2.0, -0.5, 0.25, 1.5]
SOFTSIGN_GRAD = [1.0, 2.0, -1.0, 0.5]
REENTRANT_NODE = "CheckpointFunctionBackward"
TEXT = "09_past_first_order"


def _say(key: str, **values: Any) -> str:
    return say(TEXT, f"feedback.{key}", **values)


def _error(err: BaseException) -> dict[str, str]:
    """The placeholders `error` (its type) and `message` (its first line, cut) of an error."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return {"error": type(err).__name__, "message": first[:160]}


def _shown(t: torch.Tensor) -> str:
    return str([round(v, 4) for v in t.detach().flatten().tolist()])


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.to(F64), b.to(F64), atol=1e-9, rtol=1e-7)


@contextmanager
def _recording_builders() -> Iterator[list[str]]:
    """Replace the Jacobian/Hessian builders by wrappers that note each call; restore after."""
    called: list[str] = []
    originals = [(module, name, getattr(module, name)) for module, name in BUILDERS]

    def wrap(label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            called.append(label)
            return original(*args, **kwargs)

        return recorded

    try:
        for module, name, original in originals:
            setattr(module, name, wrap(f"{module.__name__}.{name}", original))
        yield called
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


class _SquareTensors(TorchDispatchMode):
    """Notes the operator behind each n×n tensor made while it is active: a Hessian built row by
    row (`torch.stack` of n gradients) or by a transform shows up as one, however it was called.
    A dispatch mode sees the operators under `torch.func`'s transforms too."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.makers: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and tuple(t.shape) == (self.n, self.n):
                self.makers.append(f"torch.{func.overloadpacket.__name__}")
        return out


# --- exercise 1: a Hessian-vector product ------------------------------------------------------


def _hvp_reference(f: Callable[[torch.Tensor], torch.Tensor], x: list[float], v: list[float]):
    point = torch.tensor(x, dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(f(point), point, create_graph=True)
    (hv,) = torch.autograd.grad(g @ torch.tensor(v, dtype=F64), point, retain_graph=True)
    (h_ones,) = torch.autograd.grad(g.sum(), point)
    return g.detach(), hv, h_ones


def _hvp_hint(name: str, got: torch.Tensor, x: list[float], v: list[float], refs) -> str:
    g, hv, h_ones = refs
    where = {"f": name, "x": x, "v": v}
    if _close(got, g):
        return _say("hvp_gradient", **where)
    if _close(got, h_ones):
        return _say("hvp_ones", **where)
    if _close(got, -hv):
        return _say("hvp_sign_flipped", **where, expected=_shown(hv), got=_shown(got))
    return _say("hvp_wrong", **where, expected=_shown(hv), got=_shown(got))


def check_hvp(hvp: Callable[[Callable, torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Check `hvp(f, x, v)` = (Hessian of f at x) @ v, computed without building the Hessian."""
    built: set[str] = set()
    square: tuple[int, str] | None = None  # an n×n tensor made without a known builder
    for name, f, x, v in HVP_CASES:
        point = torch.tensor(x, dtype=F64, requires_grad=True)
        direction = torch.tensor(v, dtype=F64)
        try:
            with _recording_builders() as called, _SquareTensors(len(x)) as squares:
                got = hvp(f, point, direction)
        except Exception as err:  # the learner's code: report, never raise
            no_graph = "does not require grad" in str(err)
            return feedback(
                [_say("hvp_raised_no_graph" if no_graph else "hvp_raised", **_error(err))]
            )
        built.update(called)
        if squares.makers and not called:
            square = (len(x), squares.makers[0])
        if got is Ellipsis or got is None:
            return feedback([_say("hvp_returned_nothing", got="..." if got is Ellipsis else None)])
        if isinstance(got, tuple | list) and len(got) == 1:
            return feedback([_say("hvp_tuple")])
        if not isinstance(got, torch.Tensor):
            return feedback([_say("hvp_not_a_tensor", type=type(got).__name__)])
        n = len(x)
        if tuple(got.shape) == (n, n):
            return feedback([_say("hvp_matrix", n=n)])
        if tuple(got.shape) != (n,):
            return feedback([_say("hvp_shape", shape=shape_text(got), n=n)])
        refs = _hvp_reference(f, x, v)
        if not _close(got, refs[1]):
            return feedback([_hvp_hint(name, got, x, v, refs)])
    if built:
        return feedback([_say("hvp_built_matrix", builder=sorted(built)[0])])
    if square is not None:
        return feedback([_say("hvp_built_square", n=square[0], op=square[1])])
    return feedback([], success=_say("success_hvp"))


# --- exercise 2: the backward of softsign -------------------------------------------------------


def _softsign_hint(got: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> str:
    d = 1 / (1 + x.abs()) ** 2
    wrong = [  # (what a typical wrong backward returns, the message's key)
        (g, "softsign_straight_through"),
        (d, "softsign_ignores_grad_output"),
        (g / (1 + x.abs()), "softsign_square_missing"),
        (g / (1 + x) ** 2, "softsign_without_abs"),
        (-g * d, "softsign_sign_flipped"),
        (g * (x / (1 + x.abs())) ** 2, "softsign_output_squared"),
    ]
    for value, key in wrong:
        if _close(got, value):
            return _say(key)
    return _say(
        "softsign_wrong",
        grad_output=_shown(g),
        x=_shown(x),
        expected=_shown(g * d),
        got=_shown(got),
    )


def check_softsign(function: type) -> CheckResult:
    """Check a torch.autograd.Function computing softsign x / (1 + |x|): its backward, gradcheck."""
    if not (isinstance(function, type) and issubclass(function, torch.autograd.Function)):
        return feedback([_say("softsign_not_a_function", type=type(function).__name__)])
    x = torch.tensor(SOFTSIGN_X, dtype=F64, requires_grad=True)
    g = torch.tensor(SOFTSIGN_GRAD, dtype=F64)
    try:
        y = function.apply(x)
    except Exception as err:  # the learner's code: report, never raise
        return feedback([_say("forward_raised", **_error(err))])
    if not isinstance(y, torch.Tensor) or not _close(y, x.detach() / (1 + x.detach().abs())):
        return feedback([_say("forward_changed")])
    try:
        (got,) = torch.autograd.grad(y, x, g, allow_unused=True)
    except Exception as err:  # the learner's code: report, never raise
        text = str(err)
        if "ellipsis" in text:
            return feedback([_say("backward_unfilled")])
        if "incorrect number of gradients" in text:
            return feedback([_say("backward_gradient_count")])
        if "'tuple' object" in text or "and 'tuple'" in text:  # x = ctx.saved_tensors
            return feedback([_say("backward_saved_tuple", **_error(err))])
        return feedback([_say("backward_raised", **_error(err))])
    if got is None:
        return feedback([_say("backward_returned_none")])
    if not _close(got, g * (1 / (1 + x.detach().abs()) ** 2)):
        return feedback([_softsign_hint(got, x.detach(), g)])
    passed = torch.autograd.gradcheck(function.apply, (x,), raise_exception=False)
    if not passed:  # right on these points, wrong elsewhere: unusual, but say so
        return feedback([_say("gradcheck_fails")])
    return feedback([], success=_say("success_softsign"))


# --- exercise 3: checkpointing ------------------------------------------------------------------


def _run_blocks(blocks: torch.nn.Module, x: torch.Tensor, fn) -> dict[str, Any]:
    """Run fn(blocks, x), its loss's backward; count block calls, saved bytes and warnings."""
    counts = [0] * len(blocks)
    handles = [
        block.register_forward_pre_hook(lambda *_, k=k: counts.__setitem__(k, counts[k] + 1))
        for k, block in enumerate(blocks)
    ]
    known = {"x": x, **dict(blocks.named_parameters())}
    run: dict[str, Any] = {"counts": counts, "error": None, "out": None}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with track_saved(known) as log:
                    out = fn(blocks, x)
                run["out"] = out
                if isinstance(out, torch.Tensor) and out.requires_grad:
                    run["saved"] = log.packed_bytes(activations_only=True)
                    run["node"] = type(out.grad_fn).__name__ if out.grad_fn else ""
                    out.pow(2).mean().backward()
            except Exception as err:  # the learner's code: report, never raise
                run["error"] = err
        run["warnings"] = [str(w.message) for w in caught]
    finally:
        for handle in handles:
            handle.remove()
    run["grads"] = {n: p.grad for n, p in blocks.named_parameters()}
    return run


def check_checkpointed(
    fn: Callable[[torch.nn.Module, torch.Tensor], object],
    make_blocks: Callable[[], torch.nn.Module],
    x: torch.Tensor,
) -> CheckResult:
    """Check `fn(blocks, x)`: checkpointed blocks, the same gradients, fewer saved bytes."""
    try:
        with torch.random.fork_rng(devices=[]):  # building layers draws numbers
            plain_blocks, blocks = make_blocks(), make_blocks()
        blocks.load_state_dict(plain_blocks.state_dict())
        plain = _run_blocks(plain_blocks, x, _sequential)
        if plain["error"] is not None:
            raise plain["error"]
    except Exception as err:  # a broken make_blocks or input: say so instead of stopping Run All
        return feedback([_say("plain_run_failed", **_error(err))])
    run = _run_blocks(blocks, x, fn)
    reentrant_warning = any("use_reentrant" in w for w in run["warnings"])
    if run["error"] is not None:
        reentrant = "use_reentrant" in str(run["error"])
        key = "function_raised_reentrant" if reentrant else "function_raised"
        return feedback([_say(key, **_error(run["error"]))])
    out = run["out"]
    if out is Ellipsis or out is None:
        return feedback([_say("function_returned_nothing", got="..." if out is Ellipsis else None)])
    if not isinstance(out, torch.Tensor):
        return feedback([_say("function_not_a_tensor", type=type(out).__name__)])
    problems = []
    if reentrant_warning:
        problems.append(_say("reentrant_warning"))
    if out is x:  # each block's result dropped: `checkpoint(block, x)` without `x =`
        return feedback([*problems, _say("returned_the_input")])
    if not out.requires_grad:
        reentrant = any("None of the inputs have requires_grad" in w for w in run["warnings"])
        return feedback([*problems, _say("no_grad_fn_reentrant" if reentrant else "no_grad_fn")])
    if run.get("node") == REENTRANT_NODE:
        problems.append(_say("reentrant_node", node=REENTRANT_NODE))
    counts = run["counts"]
    if not problems and all(c == 1 for c in counts):
        return feedback([_say("nothing_recomputed")])
    odd = [_say("block_ran", index=k, count=c) for k, c in enumerate(counts) if c != 2]
    if odd and not problems:
        problems.append(_say("blocks_not_twice", blocks=", ".join(odd)))
    missing = [n for n, gr in run["grads"].items() if gr is None]
    if missing:
        problems.append(_say("no_gradient", name=missing[0]))
    else:
        differ = [
            n
            for n, gr in run["grads"].items()
            if not torch.allclose(gr, plain["grads"][n], atol=1e-6, rtol=1e-5)
        ]
        if differ:
            problems.append(_say("gradient_differs", name=differ[0]))
    saved, plain_saved = run["saved"], plain["saved"]  # both set: each output requires grad
    if not problems and saved >= plain_saved:
        problems.append(_say("saved_no_fewer", saved=f"{saved:,}", plain=f"{plain_saved:,}"))
    return feedback(
        problems, success=_say("success_checkpointed", saved=f"{saved:,}", plain=f"{plain_saved:,}")
    )


def _sequential(blocks: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = block(x)
    return x
