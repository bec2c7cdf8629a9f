"""Split learning with three models: the first post's program, as functions both notebooks share.

Model 1 (embedding + linear) belongs to the "client" that holds the input; model 2 to a middle
party; model 3 (linear + loss) to the label holder. Forward passes activations across each cut,
backward passes gradients back: `loss.backward()`, then `f2.backward(ff2.grad)`, then
`f1.backward(ff1.grad)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "MLP1",
    "MLP2L",
    "POST_INPUT",
    "POST_LABEL",
    "POST_SEED",
    "MLPem0",
    "SplitModels",
    "SplitResult",
    "build_models",
    "cut",
    "joint_step",
    "make_optimizers",
    "split_step",
]

POST_SEED = 42
POST_INPUT = [[2, 1, 3, 0, 9]]
#: The post's label: called one-hot there, but CrossEntropyLoss reads it as 3 class indices along
#: the output's dim 1 (see notebook 06).
POST_LABEL = [[0, 1, 0]]


class MLPem0(nn.Module):
    """Model 1 (the client's): token ids -> Embedding -> Linear."""

    def __init__(self, num_embeddings: int = 10, embedding_dim: int = 6, model_dim: int = 6):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)
        self.layer = nn.Linear(embedding_dim, model_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.layer(self.embed(tokens))


class MLP1(nn.Module):
    """Model 2 (the middle party's): one Linear layer."""

    def __init__(self, in_dim: int = 6, model_dim: int = 6):
        super().__init__()
        self.layer = nn.Linear(in_dim, model_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layer(features)


class MLP2L(nn.Module):
    """Model 3 (the label holder's): Linear, then CrossEntropyLoss exactly as the post calls it."""

    def __init__(self, in_dim: int = 6, num_classes: int = 3):
        super().__init__()
        self.layer = nn.Linear(in_dim, num_classes)

    def forward(self, features: torch.Tensor, label: torch.Tensor):
        out = self.layer(features)
        loss = nn.CrossEntropyLoss()(out, label)
        return out, loss


@dataclass
class SplitModels:
    """The three models of the post."""

    model1: MLPem0
    model2: MLP1
    model3: MLP2L

    def as_list(self) -> list[nn.Module]:
        """[model1, model2, model3]."""
        return [self.model1, self.model2, self.model3]

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """All parameters, named model1.embed.weight, model2.layer.bias, ..."""
        return {
            f"model{i}.{name}": p
            for i, m in enumerate(self.as_list(), start=1)
            for name, p in m.named_parameters()
        }


def build_models(
    seed: int = POST_SEED, dims: tuple[int, int, int, int] = (10, 6, 6, 3)
) -> SplitModels:
    """The post's three models, created in the post's order right after `torch.manual_seed(seed)`.

    `dims` is (vocabulary, embedding/model width, model 2 width, classes). Model 2's input is model
    1's output width (the post wires it to `embedding_dim`, which works only because both are 6).
    """
    vocab, width, width2, classes = dims
    torch.manual_seed(seed)
    model1 = MLPem0(vocab, width, width)
    model2 = MLP1(width, width2)
    model3 = MLP2L(width2, classes)
    return SplitModels(model1, model2, model3)


def make_optimizers(models: SplitModels, lr: float = 0.01) -> list[torch.optim.Optimizer]:
    """One Adam optimizer per model, as in the post."""
    return [torch.optim.Adam(m.parameters(), lr) for m in models.as_list()]


def cut(activation: torch.Tensor) -> torch.Tensor:
    """The hand-off across a cut: a new leaf with the same values, which will receive a .grad."""
    return activation.clone().detach().requires_grad_(True)


@dataclass
class SplitResult:
    """Everything one split step produced, for inspection."""

    f1: torch.Tensor
    ff1: torch.Tensor
    f2: torch.Tensor
    ff2: torch.Tensor
    out: torch.Tensor
    loss: torch.Tensor


def split_step(
    models: SplitModels,
    tokens: torch.Tensor,
    label: torch.Tensor,
    optimizers: list[torch.optim.Optimizer] | None = None,
) -> SplitResult:
    """One training step of the post's split flow; steps each model's optimizer if given."""
    f1 = models.model1(tokens)
    ff1 = cut(f1)
    f2 = models.model2(ff1)
    ff2 = cut(f2)
    out, loss = models.model3(ff2, label)
    stages = [(loss, None), (f2, ff2), (f1, ff1)]
    for stage, (tensor, cut_leaf) in zip((2, 1, 0), stages, strict=True):
        if optimizers is not None:
            optimizers[stage].zero_grad()
        if cut_leaf is None:
            tensor.backward()
        else:
            tensor.backward(cut_leaf.grad)
        if optimizers is not None:
            optimizers[stage].step()
    return SplitResult(f1, ff1, f2, ff2, out, loss)


def joint_step(
    models: SplitModels,
    tokens: torch.Tensor,
    label: torch.Tensor,
    optimizers: list[torch.optim.Optimizer] | None = None,
) -> SplitResult:
    """The same step with no cuts: one graph, one backward; f1 and f2 retain their grads."""
    if optimizers is not None:
        for opt in optimizers:
            opt.zero_grad()
    f1 = models.model1(tokens)
    f1.retain_grad()
    f2 = models.model2(f1)
    f2.retain_grad()
    out, loss = models.model3(f2, label)
    loss.backward()
    if optimizers is not None:
        for opt in optimizers:
            opt.step()
    return SplitResult(f1, f1, f2, f2, out, loss)
