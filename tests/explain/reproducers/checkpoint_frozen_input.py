"""no_graph: a reentrant checkpoint around a block whose input needs no gradient (a frozen
embedding), so the block's result has no graph."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
embedding = nn.Embedding(10, 4).requires_grad_(False)  # frozen, as pretrained
block = nn.Linear(4, 4)
tokens = torch.tensor([1, 2, 3])
h = checkpoint(block, embedding(tokens), use_reentrant=True)  # cause
loss = h.pow(2).sum()
loss.backward()
GRADS = {"weight": block.weight.grad, "bias": block.bias.grad}
