"""numpy_requires_grad: the item embeddings of every propagation layer are summed with np.sum
over a list of tensors inside forward().

https://github.com/xiaxin1998/DHCN/issues/8
Do you have any RuntimeError when you run this code?
"""

import numpy as np
import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    return nn.Embedding(5, 3), torch.rand(5, 5)


def right():  # the sum done by torch, so that the embeddings keep learning
    embedding, adjacency = setup()
    final, item_embeddings = [embedding.weight], embedding.weight
    for _ in range(2):
        item_embeddings = adjacency @ item_embeddings
        final.append(item_embeddings)
    torch.stack(final).sum(0).sum().backward()
    return {"embedding": embedding.weight.grad}


class HyperConv(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, adjacency, embedding):
        item_embeddings = embedding
        final = [item_embeddings]
        for _ in range(self.layers):
            item_embeddings = adjacency @ item_embeddings
            final.append(item_embeddings)
        item_embeddings = np.sum(final, 0)  # cause
        return item_embeddings


embedding, adjacency = setup()
HyperConv(2)(adjacency, embedding.weight).sum().backward()
GRADS = {"embedding": embedding.weight.grad}
