"""Checkers for notebook 09 (past first order): a Hessian-vector product, a custom backward,
gradient checkpointing."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from helpers.checks import CheckResult, feedback
from helpers.memory import track_saved

__all__ = ["check_checkpointed", "check_hvp", "check_softsign"]

F64 = torch.float64
#: The functions, points and directions on which a Hessian-vector product is checked.
HVP_CASES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], list[float], list[float]]] = [
    ("x0² x1 + x1³", lambda x: x[0] ** 2 * x[1] + x[1] ** 3, [1.0, 2.0], [1.0, -1.0]),
    ("sum(sin(x) · roll(x))", lambda x: (x.sin() * x.roll(1)).sum(), [0.5, -1.0, 2.0, 0.25],
     [1.0, 0.0, -2.0, 0.5]),
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


def _error_text(err: BaseException) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first[:160]}"


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


# --- exercise 1: a Hessian-vector product ------------------------------------------------------


def _hvp_reference(f: Callable[[torch.Tensor], torch.Tensor], x: list[float], v: list[float]):
    point = torch.tensor(x, dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(f(point), point, create_graph=True)
    (hv,) = torch.autograd.grad(g @ torch.tensor(v, dtype=F64), point, retain_graph=True)
    (h_ones,) = torch.autograd.grad(g.sum(), point)
    return g.detach(), hv, h_ones


def _hvp_hint(name: str, got: torch.Tensor, x: list[float], v: list[float], refs) -> str:
    g, hv, h_ones = refs
    where = f"for f = {name} at x = {x}, v = {v}"
    if _close(got, g):
        return (
            f"{where} you returned the gradient of f, not H v: differentiate the dot product "
            "(gradient · v) once more, which needs create_graph=True in the first grad call"
        )
    if _close(got, h_ones):
        return f"{where} you returned H times a vector of ones: v was ignored"
    if _close(got, -hv):
        return f"{where} the sign is flipped: expected {_shown(hv)}, got {_shown(got)}"
    return f"{where} H v should be {_shown(hv)}, got {_shown(got)}"


def check_hvp(hvp: Callable[[Callable, torch.Tensor, torch.Tensor], object]) -> CheckResult:
    """Check `hvp(f, x, v)` = (Hessian of f at x) @ v, computed without building the Hessian."""
    built: set[str] = set()
    for name, f, x, v in HVP_CASES:
        point = torch.tensor(x, dtype=F64, requires_grad=True)
        direction = torch.tensor(v, dtype=F64)
        try:
            with _recording_builders() as called:
                got = hvp(f, point, direction)
        except Exception as err:  # the learner's code: report, never raise
            hint = ""
            if "does not require grad" in str(err):
                hint = (
                    " (the gradient you differentiated a second time has no graph: pass "
                    "create_graph=True to the first torch.autograd.grad call)"
                )
            return feedback([f"hvp raised {_error_text(err)}{hint}"])
        built.update(called)
        if got is Ellipsis or got is None:
            return feedback([f"hvp returned {'...' if got is Ellipsis else None}: return H v"])
        if isinstance(got, tuple | list) and len(got) == 1:
            return feedback(
                ["hvp returned a tuple: torch.autograd.grad returns one gradient per input, "
                 "take its element [0]"]
            )
        if not isinstance(got, torch.Tensor):
            return feedback([f"hvp returned a {type(got).__name__}, not a tensor"])
        n = len(x)
        if tuple(got.shape) == (n, n):
            return feedback(
                [f"hvp returned a {n}×{n} matrix: that is the Hessian itself; return H v, a "
                 "vector with x's shape"]
            )
        if tuple(got.shape) != (n,):
            return feedback([f"hvp returned shape {tuple(got.shape)}; H v has x's shape ({n},)"])
        refs = _hvp_reference(f, x, v)
        if not _close(got, refs[1]):
            return feedback([_hvp_hint(name, got, x, v, refs)])
    if built:
        return feedback(
            [f"the numbers are right, but you built the whole matrix with {sorted(built)[0]}: "
             "an n-dimensional x costs n backward passes and n² numbers. Two grad calls give "
             "H v at the cost of about one more backward pass"]
        )
    return feedback([], success="Right: H v from two backward passes, no n×n matrix built.")


# --- exercise 2: the backward of softsign -------------------------------------------------------


def _softsign_hint(got: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> str:
    d = 1 / (1 + x.abs()) ** 2
    wrong = [
        (g, "backward passes grad_output through unchanged (a straight-through estimator): "
            "multiply it by the derivative 1 / (1 + |x|)²"),
        (d, "backward ignores grad_output: the chain rule multiplies the incoming gradient "
            "by the local derivative"),
        (g / (1 + x.abs()), "the square is missing: d/dx x / (1 + |x|) = 1 / (1 + |x|)²"),
        (g / (1 + x) ** 2, "use |x|: for negative x the derivative is 1 / (1 - x)²"),
        (-g * d, "the sign is flipped: softsign increases everywhere"),
        (g * (x / (1 + x.abs())) ** 2, "that is the output squared; the derivative is "
            "1 / (1 + |x|)², computed from the input x"),
    ]
    for value, hint in wrong:
        if _close(got, value):
            return hint
    return (
        f"with grad_output {_shown(g)} at x = {_shown(x)} backward should return "
        f"{_shown(g * d)}, got {_shown(got)}"
    )


def check_softsign(function: type) -> CheckResult:
    """Check a torch.autograd.Function computing softsign x / (1 + |x|): its backward, gradcheck."""
    if not (isinstance(function, type) and issubclass(function, torch.autograd.Function)):
        return feedback(
            [f"pass the class itself (a torch.autograd.Function), got {type(function).__name__}"]
        )
    x = torch.tensor(SOFTSIGN_X, dtype=F64, requires_grad=True)
    g = torch.tensor(SOFTSIGN_GRAD, dtype=F64)
    try:
        y = function.apply(x)
    except Exception as err:  # the learner's code: report, never raise
        return feedback([f"the forward raised {_error_text(err)}"])
    if not isinstance(y, torch.Tensor) or not _close(y, x.detach() / (1 + x.detach().abs())):
        return feedback(["the forward no longer computes x / (1 + |x|): change only backward"])
    try:
        (got,) = torch.autograd.grad(y, x, g, allow_unused=True)
    except Exception as err:  # the learner's code: report, never raise
        text = str(err)
        if "ellipsis" in text:
            return feedback(["backward still returns `...`: return the gradient for x"])
        if "incorrect number of gradients" in text:
            return feedback(["backward must return exactly one gradient: forward has one input"])
        return feedback([f"backward raised {_error_text(err)}"])
    if got is None:
        return feedback(["backward returned None: x gets no gradient at all"])
    if not _close(got, g * (1 / (1 + x.detach().abs()) ** 2)):
        return feedback([_softsign_hint(got, x.detach(), g)])
    passed = torch.autograd.gradcheck(function.apply, (x,), raise_exception=False)
    if not passed:  # right on these points, wrong elsewhere: unusual, but say so
        return feedback(["backward is right on the test points, but gradcheck fails on them"])
    return feedback([], success="gradcheck passes: backward is the derivative of forward.")


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
        return feedback([f"could not run the blocks without checkpointing: {_error_text(err)}"])
    run = _run_blocks(blocks, x, fn)
    reentrant_warning = any("use_reentrant" in w for w in run["warnings"])
    if run["error"] is not None:
        hint = " (pass use_reentrant=False explicitly)" if "use_reentrant" in str(
            run["error"]) else ""
        return feedback([f"your function raised {_error_text(run['error'])}{hint}"])
    out = run["out"]
    if out is Ellipsis or out is None:
        return feedback([f"your function returned {'...' if out is Ellipsis else None}: "
                         "return the last block's output"])
    if not isinstance(out, torch.Tensor):
        return feedback([f"your function returned a {type(out).__name__}, not a tensor"])
    problems = []
    if reentrant_warning:
        problems.append(
            "torch warned that use_reentrant should be passed explicitly: pass "
            "use_reentrant=False (the default is still the older reentrant variant)"
        )
    if not out.requires_grad:
        hint = (
            "checkpoint(..., use_reentrant=True) with an input that does not require grad "
            "returns a result without history: use use_reentrant=False"
            if any("None of the inputs have requires_grad" in w for w in run["warnings"])
            else "was it computed under torch.no_grad()?"
        )
        return feedback([*problems, f"the output has no grad_fn, so no gradient can flow: {hint}"])
    if run.get("node") == REENTRANT_NODE:
        problems.append(
            "the output's grad_fn is CheckpointFunctionBackward: that is use_reentrant=True; "
            "pass use_reentrant=False"
        )
    counts = run["counts"]
    if not problems and all(c == 1 for c in counts):
        return feedback(
            ["each block ran once: nothing was recomputed, so nothing was checkpointed. Wrap "
             "each block: h = checkpoint(block, h, use_reentrant=False)"]
        )
    odd = [f"block {k} ran {c} times" for k, c in enumerate(counts) if c != 2]
    if odd and not problems:
        problems.append(
            ", ".join(odd) + "; a checkpointed block runs twice: once forward, once again in "
            "backward (call each block once in your function)"
        )
    missing = [n for n, gr in run["grads"].items() if gr is None]
    if missing:
        problems.append(f"{missing[0]} got no gradient")
    else:
        differ = [n for n, gr in run["grads"].items()
                  if not torch.allclose(gr, plain["grads"][n], atol=1e-6, rtol=1e-5)]
        if differ:
            problems.append(
                f"{differ[0]}.grad differs from the run without checkpointing: the "
                "checkpointed blocks must compute exactly what the plain ones do"
            )
    saved, plain_saved = run["saved"], plain["saved"]  # both set: each output requires grad
    if not problems and saved >= plain_saved:
        problems.append(
            f"the graph saved {saved:,} bytes of activations, no fewer than without "
            f"checkpointing ({plain_saved:,})"
        )
    return feedback(
        problems,
        success=f"Each block ran twice, the graph saved {saved:,} instead of {plain_saved:,} "
        "bytes of activations, and every gradient equals the plain run's.",
    )


def _sequential(blocks: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = block(x)
    return x
