"""Checkers for notebook 06 (split backward through three models).

Each checker compares the learner's result with a reference it computes itself (a joint run, or the
post's per-model optimizers) and returns `feedback([...])` that says what is wrong. A checker never
raises, so the notebook runs to the end with the `...` placeholders still in place.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from helpers.checks import CheckResult, clean_message, feedback
from helpers.split import (
    SplitModels,
    build_models,
    changed_models,
    clone_models,
    joint_step,
    load_parameters,
    make_optimizers,
    post_tensors,
    run_split,
)

__all__ = ["check_handoff", "check_one_optimizer", "check_token_loss"]

PLACEHOLDER = type(...)


def _close(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None or a.shape != b.shape:
        return False
    return bool(torch.allclose(a.detach(), b.detach(), rtol=1e-5, atol=1e-7))


def _not_models(models: object) -> list[str]:
    if isinstance(models, SplitModels):
        return []
    return [
        f"models is a {type(models).__name__}, not the SplitModels from build_models(); "
        "pass the models you ran"
    ]


def _grads(models: SplitModels, k: int) -> dict[str, torch.Tensor | None]:
    prefix = f"model{k}."
    return {n: p.grad for n, p in models.named_parameters().items() if n.startswith(prefix)}


def _fresh(models: SplitModels) -> SplitModels:
    copy = clone_models(models)
    for p in copy.named_parameters().values():
        p.grad = None
    return copy


def _model1_grads_for(
    models: SplitModels, tokens: torch.Tensor, gradient: torch.Tensor
) -> dict[str, torch.Tensor | None]:
    """Model 1's gradients if `gradient` is handed to f1.backward()."""
    copy = _fresh(models)
    copy.model1(tokens).backward(gradient.detach())
    return _grads(copy, 1)


def _same(grads: Mapping[str, torch.Tensor | None], ref: Mapping, factor: float = 1.0) -> bool:
    return all(
        g is not None and ref[n] is not None and _close(g, factor * ref[n])
        for n, g in grads.items()
    )


def _stage_problem(k: int, grads: Mapping, ref: Mapping, how: str) -> str | None:
    if all(g is None for g in grads.values()):
        return f"model {k} has no gradients yet: {how}"
    if _same(grads, ref):
        return None
    if _same(grads, ref, 2.0):
        return (
            f"model {k}'s gradients are doubled: its backward ran twice (each call adds to .grad)"
        )
    return f"model {k}'s gradients differ from the joint run's: {how}"


def check_handoff(
    models: SplitModels,
    ff1: torch.Tensor,
    ff2: torch.Tensor,
    tokens: torch.Tensor | None = None,
    label: torch.Tensor | None = None,
) -> CheckResult:
    """Check a split backward: every model's .grad and ff1.grad equal those of the joint run."""
    problems = _not_models(models)
    for name, t in (("ff1", ff1), ("ff2", ff2)):
        if not isinstance(t, torch.Tensor):
            problems.append(f"{name} is a {type(t).__name__}, not the tensor at the cut")
    if problems:
        return feedback(problems)
    if tokens is None or label is None:
        tokens, label = post_tensors()
    try:
        ref_models = _fresh(models)
        joint = joint_step(ref_models, tokens, label)
    except Exception as err:  # the learner's models may be in any state
        return feedback([f"could not run the joint reference: {clean_message(str(err))}"])

    if not ff2.requires_grad:
        problems.append("ff2 does not require grad: cut with f2.clone().detach().requires_grad_()")
    elif ff2.grad is None:
        problems.append("ff2.grad is None: run loss.backward() first (stage 3)")
    p3 = _stage_problem(3, _grads(models, 3), _grads(ref_models, 3), "call loss.backward() once")
    if p3:
        problems.append(p3)

    grads2 = _grads(models, 2)
    p2 = _stage_problem(
        2,
        grads2,
        _grads(ref_models, 2),
        "hand the gradient back with f2.backward(ff2.grad), after loss.backward()",
    )
    if p2:
        problems.append(p2)
    elif ff1.grad is None and not ff1.requires_grad:
        problems.append("ff1.grad is None: cut f1 with requires_grad_(True) so model 2 can fill it")
    elif ff1.grad is None:
        problems.append(
            "ff1.grad is None, though ff1 requires grad: run model 2 on ff1 itself, and keep "
            "ff1.grad (do not set it to None) until f1.backward(ff1.grad) has used it"
        )

    grads1 = _grads(models, 1)
    ref1 = _grads(ref_models, 1)
    if all(g is None for g in grads1.values()):
        problems.append(
            "model 1 has no gradients yet: hand ff1.grad back with f1.backward(ff1.grad)"
        )
    elif not _same(grads1, ref1):
        hint = "f1.backward() needs ff1.grad, the gradient that arrived at model 2's input"
        try:
            if ff2.grad is not None and _same(_model1_grads_for(models, tokens, ff2.grad), grads1):
                hint = (
                    "these are the gradients ff2.grad gives: f1.backward() needs ff1.grad "
                    "(ff2.grad has the same shape only because every width here is 6)"
                )
            elif ff1.grad is not None and _same(_model1_grads_for(models, tokens, ff1), grads1):
                hint = "you handed back ff1 itself (the activation): pass ff1.grad"
            elif _same(grads1, ref1, 2.0):
                hint = "they are doubled: f1.backward() ran twice (each call adds to .grad)"
        except Exception:  # a hint is a bonus; never fail the check on it
            pass
        problems.append(f"model 1's gradients differ from the joint run's: {hint}")
    if not problems and not _close(ff1.grad, joint.f1.grad):
        if ff1.grad is not None and not bool(ff1.grad.any()):
            problems.append(
                "ff1.grad is all zeros, though model 1's gradients are right: it was cleared "
                "after f1.backward(ff1.grad) (e.g. ff1.grad.zero_()); leave the gradient model 2 "
                "sent back as it is"
            )
        else:
            problems.append("ff1.grad differs from f1.grad of the joint run")
    return feedback(
        problems,
        success="Every gradient, and ff1.grad, equals the joint run's: the hand-off is right.",
    )


def _models_like(named: Mapping[str, torch.Tensor]) -> SplitModels:
    vocab, emb = named["model1.embed.weight"].shape
    width = named["model1.layer.weight"].shape[0]
    width2 = named["model2.layer.weight"].shape[0]
    classes = named["model3.layer.weight"].shape[0]
    models = build_models(0, (vocab, width, width2, classes), embedding_dim=emb)
    return load_parameters(models, named)


def check_one_optimizer(
    models: SplitModels,
    before: Mapping[str, torch.Tensor],
    tokens: torch.Tensor | None = None,
    label: torch.Tensor | None = None,
    lr: float = 0.01,
) -> CheckResult:
    """Check one split step with one Adam over all models: the same as one Adam per model."""
    problems = _not_models(models)
    if not isinstance(before, Mapping):
        problems.append(
            f"before is a {type(before).__name__}: take it with "
            "snapshot(models.named_parameters()) before the step"
        )
    if problems:
        return feedback(problems)
    if tokens is None or label is None:
        tokens, label = post_tensors()
    try:
        with torch.random.fork_rng():
            reference = _models_like(before)
        run_split(reference, tokens, label, make_optimizers(reference, lr))
        changed = changed_models(before, models)
    except Exception as err:
        return feedback([f"could not compare with the reference step: {clean_message(str(err))}"])
    missing = [m for m in ("model1", "model2", "model3") if m not in changed]
    if not changed:
        problems.append(
            "no parameter changed: call opt.step() once, after all three backward calls"
        )
    elif changed == ["model3"]:
        problems.append(
            "only model 3 changed: opt.step() ran right after loss.backward(), when models 2 and 1 "
            "had no gradients yet (Adam skips a parameter whose .grad is None); call step() after "
            "f1.backward(ff1.grad)"
        )
    elif missing:
        problems.append(
            f"{' and '.join(missing)} did not change: their gradients were not there when "
            "opt.step() ran (step() too early, or a zero_grad() between the backward calls "
            "wiped them)"
        )
    else:
        mine = models.named_parameters()
        off = sorted(
            {
                n.split(".")[0]
                for n, p in reference.named_parameters().items()
                if not _close(mine[n], p)
            }
        )
        if off:
            problems.append(
                f"all three models changed, but {', '.join(off)} not by one Adam step (lr {lr}) "
                "with the joint gradients: call zero_grad() once before the backward calls and "
                "step() once after them"
            )
    return feedback(
        problems,
        success="One Adam over all three models, stepped once at the end, "
        "gives exactly the post's per-model result.",
    )


def _loss_value(loss: torch.Tensor) -> float | None:
    try:
        return float(loss.detach())
    except Exception:
        return None


def check_token_loss(out: torch.Tensor, target: object, loss: object) -> CheckResult:
    """Check the corrected loss: class 1 for each of the 5 tokens, cross-entropy over 3 classes."""
    if not isinstance(out, torch.Tensor) or out.dim() != 3:
        return feedback(["out should be model 3's output, shape [1, 5, 3]"])
    batch, tokens, classes = out.shape
    problems = []
    if isinstance(target, PLACEHOLDER) or target is None:
        problems.append("target is still `...`: give one class index per token")
    elif not isinstance(target, torch.Tensor):
        problems.append(f"target is a {type(target).__name__}; make it a tensor")
    elif target.is_floating_point():
        if target.numel() != out.numel():
            problems.append(
                "target is a float tensor, so CrossEntropyLoss reads it as class probabilities; "
                f"indices must be integers: torch.tensor([[1] * {tokens}]) (dtype long)"
            )
        elif not torch.equal(
            target.reshape(-1, classes), torch.eye(classes)[1].expand(batch * tokens, classes)
        ):
            problems.append("as probabilities, every token's row should be [0, 1, 0]")
    elif target.numel() != batch * tokens:
        problems.append(
            f"target has {target.numel()} elements; one class index per token makes "
            f"{batch * tokens}"
        )
    elif not bool((target == 1).all()):
        problems.append("every token's class is 1 (the position of the 1 in [0, 1, 0])")

    if isinstance(loss, PLACEHOLDER) or loss is None:
        problems.append("loss is still `...`: compute CrossEntropyLoss over the 3 classes")
        return feedback(problems)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        problems.append("loss should be a single-number tensor (the mean over the tokens)")
        return feedback(problems)
    value = _loss_value(loss)
    with torch.no_grad():
        flat = out.detach().reshape(-1, classes)
        right = nn.functional.cross_entropy(flat, torch.ones(len(flat), dtype=torch.long))
        post = right
        if tokens > 1 and classes == 3:  # the post's call: dim 1 (tokens) read as classes
            post_label = torch.tensor([[0, 1, 0]]).expand(batch, 3)
            post = nn.functional.cross_entropy(out.detach(), post_label)
        summed = nn.functional.cross_entropy(
            flat, torch.ones(len(flat), dtype=torch.long), reduction="sum"
        )
    is_post = value is not None and abs(value - float(post)) < 1e-6
    if is_post and abs(float(post) - float(right)) > 1e-6:
        problems.append(
            "this is the post's loss: with out of shape [1, 5, 3], CrossEntropyLoss takes dim 1 "
            "(the 5 tokens) as classes; put the classes last-but-one with out.permute(0, 2, 1) "
            "or flatten with out.reshape(-1, 3)"
        )
    elif value is not None and abs(value - float(summed)) < 1e-5:
        problems.append("loss is the sum over tokens; CrossEntropyLoss's default is the mean")
    elif value is None or abs(value - float(right)) > 1e-5:
        problems.append(
            f"loss is {value if value is None else round(value, 4)}, but the mean cross-entropy "
            "of class 1 over the 5 tokens is different; use nn.CrossEntropyLoss() with the classes "
            "in dim 1: out.permute(0, 2, 1), or out.reshape(-1, 3) with target.reshape(-1)"
        )
    elif loss.grad_fn is None:
        problems.append(
            "loss has no grad_fn, so backward() cannot reach the model: compute it from out itself "
            "(not out.detach(), not under torch.no_grad())"
        )
    return feedback(problems, success="Right: each token's 3 scores against class 1, averaged.")
