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
from helpers.language import say
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

__all__ = ["check_handoff", "check_one_optimizer", "check_token_loss", "previous_step"]

#: The notebook whose text file holds this module's messages ([feedback] there); 06b uses them too.
TEXT = "06_split_backward_three_models"
PLACEHOLDER = type(...)


def _close(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None or a.shape != b.shape:
        return False
    return bool(torch.allclose(a.detach(), b.detach(), rtol=1e-5, atol=1e-7))


def _not_models(models: object) -> list[str]:
    if isinstance(models, SplitModels):
        return []
    return [say(TEXT, "feedback.not_models", type=type(models).__name__)]


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


def _stage_problem(k: int, grads: Mapping, ref: Mapping) -> str | None:
    how = say(TEXT, f"feedback.how_stage{k}")
    if all(g is None for g in grads.values()):
        return say(TEXT, "feedback.grads_missing", k=k, how=how)
    if _same(grads, ref):
        return None
    if _same(grads, ref, 2.0):
        return say(TEXT, "feedback.grads_doubled", k=k)
    return say(TEXT, "feedback.grads_differ", k=k, how=how)


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
            problems.append(
                say(TEXT, "feedback.not_a_cut_tensor", name=name, type=type(t).__name__)
            )
    if problems:
        return feedback(problems)
    if tokens is None or label is None:
        tokens, label = post_tensors()
    try:
        ref_models = _fresh(models)
        joint = joint_step(ref_models, tokens, label)
    except Exception as err:  # the learner's models may be in any state
        return feedback([say(TEXT, "feedback.joint_failed", error=clean_message(str(err)))])

    if not ff2.requires_grad:
        problems.append(say(TEXT, "feedback.ff2_no_requires_grad"))
    elif ff2.grad is None:
        problems.append(say(TEXT, "feedback.ff2_grad_none"))
    p3 = _stage_problem(3, _grads(models, 3), _grads(ref_models, 3))
    if p3:
        problems.append(p3)

    p2 = _stage_problem(2, _grads(models, 2), _grads(ref_models, 2))
    if p2:
        problems.append(p2)
    elif ff1.grad is None and not ff1.requires_grad:
        problems.append(say(TEXT, "feedback.ff1_no_requires_grad"))
    elif ff1.grad is None:
        problems.append(say(TEXT, "feedback.ff1_grad_dropped"))

    grads1 = _grads(models, 1)
    ref1 = _grads(ref_models, 1)
    if all(g is None for g in grads1.values()):
        problems.append(
            say(TEXT, "feedback.grads_missing", k=1, how=say(TEXT, "feedback.how_stage1"))
        )
    elif not _same(grads1, ref1):
        hint_key = "hint_needs_ff1_grad"
        try:
            if ff2.grad is not None and _same(_model1_grads_for(models, tokens, ff2.grad), grads1):
                hint_key = "hint_ff2_grad"
            elif ff1.grad is not None and _same(_model1_grads_for(models, tokens, ff1), grads1):
                hint_key = "hint_activation"
            elif _same(grads1, ref1, 2.0):
                hint_key = "hint_doubled"
            elif _same(grads1, ref1, 3.0):  # 1 + 2: the second round's ff1.grad was doubled
                hint_key = "hint_handoff_twice"
        except Exception:  # a hint is a bonus; never fail the check on it
            pass
        hint = say(TEXT, f"feedback.{hint_key}")
        problems.append(say(TEXT, "feedback.grads_differ", k=1, how=hint))
    if not problems and not _close(ff1.grad, joint.f1.grad):
        if ff1.grad is not None and not bool(ff1.grad.any()):
            problems.append(say(TEXT, "feedback.ff1_grad_cleared"))
        else:
            problems.append(say(TEXT, "feedback.ff1_grad_differs"))
    return feedback(problems, success=say(TEXT, "feedback.handoff_success"))


def _models_like(named: Mapping[str, torch.Tensor]) -> SplitModels:
    vocab, emb = named["model1.embed.weight"].shape
    width = named["model1.layer.weight"].shape[0]
    width2 = named["model2.layer.weight"].shape[0]
    classes = named["model3.layer.weight"].shape[0]
    models = build_models(0, (vocab, width, width2, classes), embedding_dim=emb)
    return load_parameters(models, named)


def _previous_batch(tokens: torch.Tensor) -> torch.Tensor:
    """The batch before the exercise's: the same tokens in reverse order."""
    return tokens.flip(-1)


def previous_step(
    models: SplitModels, tokens: torch.Tensor | None = None, label: torch.Tensor | None = None
) -> None:
    """The backward pass of the batch before (the exercise's tokens reversed), whose gradients
    stay in every `.grad` as they do after any step that did not zero them: a step that forgets
    `zero_grad()` then adds them to its own. Give both `tokens` and `label`, or neither (the
    post's pair); one without the other is refused, since half of the post's pair would not match
    the learner's batch."""
    if (tokens is None) != (label is None):
        given, missing = ("tokens", "label") if label is None else ("label", "tokens")
        raise TypeError(say(TEXT, "feedback.half_a_batch", given=given, missing=missing))
    if tokens is None or label is None:
        tokens, label = post_tensors()
    _, loss = models.model3(models.model2(models.model1(_previous_batch(tokens))), label)
    loss.backward()


def _kept_previous_gradients(
    models: SplitModels,
    reference: SplitModels,
    before: Mapping[str, torch.Tensor],
    tokens: torch.Tensor,
    label: torch.Tensor,
) -> bool:
    """True when every gradient of `models` is the step's own plus the previous batch's (and
    some differ from the step's own): zero_grad() did not run before the backward calls."""
    with torch.random.fork_rng():
        earlier = _models_like(before)
    previous_step(earlier, tokens, label)
    mine, own, old = (m.named_parameters() for m in (models, reference, earlier))
    added = [
        _close(mine[n].grad, own[n].grad + old[n].grad)
        for n in own
        if own[n].grad is not None and old[n].grad is not None
    ]
    differs = any(not _close(mine[n].grad, own[n].grad) for n in own if own[n].grad is not None)
    return bool(added) and all(added) and differs


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
        problems.append(say(TEXT, "feedback.before_not_mapping", type=type(before).__name__))
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
        return feedback([say(TEXT, "feedback.reference_failed", error=clean_message(str(err)))])
    missing = [m for m in ("model1", "model2", "model3") if m not in changed]
    if changed and _kept_previous_gradients(models, reference, before, tokens, label):
        problems.append(say(TEXT, "feedback.previous_gradients_kept"))
    elif not changed:
        problems.append(say(TEXT, "feedback.nothing_changed"))
    elif changed == ["model3"]:
        problems.append(say(TEXT, "feedback.only_model3_changed"))
    elif missing:
        names = missing[0]
        for name in missing[1:]:  # "model1 and model2"
            names = say(TEXT, "feedback.two_names", first=names, second=name)
        problems.append(say(TEXT, "feedback.models_unchanged", models=names))
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
            problems.append(say(TEXT, "feedback.not_one_adam_step", models=", ".join(off), lr=lr))
    return feedback(problems, success=say(TEXT, "feedback.one_optimizer_success"))


def _loss_value(loss: torch.Tensor) -> float | None:
    try:
        return float(loss.detach())
    except Exception:
        return None


def check_token_loss(out: torch.Tensor, target: object, loss: object) -> CheckResult:
    """Check the corrected loss: class 1 for each of the 5 tokens, cross-entropy over 3 classes."""
    if not isinstance(out, torch.Tensor) or out.dim() != 3:
        return feedback([say(TEXT, "feedback.out_shape")])
    batch, tokens, classes = out.shape
    problems = []
    if isinstance(target, PLACEHOLDER) or target is None:
        problems.append(say(TEXT, "feedback.target_unfilled"))
    elif not isinstance(target, torch.Tensor):
        problems.append(say(TEXT, "feedback.target_not_tensor", type=type(target).__name__))
    elif target.is_floating_point():
        if target.numel() != out.numel():
            problems.append(say(TEXT, "feedback.target_float", tokens=tokens))
        elif not torch.equal(
            target.reshape(-1, classes), torch.eye(classes)[1].expand(batch * tokens, classes)
        ):
            problems.append(say(TEXT, "feedback.target_probabilities"))
    elif target.numel() != batch * tokens:
        problems.append(
            say(TEXT, "feedback.target_size", count=target.numel(), expected=batch * tokens)
        )
    elif not bool((target == 1).all()):
        problems.append(say(TEXT, "feedback.target_class"))

    if isinstance(loss, PLACEHOLDER) or loss is None:
        problems.append(say(TEXT, "feedback.loss_unfilled"))
        return feedback(problems)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        problems.append(say(TEXT, "feedback.loss_not_scalar"))
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
        problems.append(say(TEXT, "feedback.posts_loss"))
    elif value is not None and abs(value - float(summed)) < 1e-5:
        problems.append(say(TEXT, "feedback.loss_summed"))
    elif value is None or abs(value - float(right)) > 1e-5:
        shown = value if value is None else round(value, 4)
        problems.append(say(TEXT, "feedback.loss_wrong", value=shown))
    elif loss.grad_fn is None:
        problems.append(say(TEXT, "feedback.loss_no_grad_fn"))
    return feedback(problems, success=say(TEXT, "feedback.token_loss_success"))
