"""leaf_inplace: fixed sinusoidal position codes are written into an nn.Embedding's weight (a
leaf that requires grad) by slice assignment.

https://github.com/Atcold/NYU-DLSP20/issues/765
RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""

import numpy as np
import torch
from torch import nn


def table(nb_p, dim):
    return np.array(
        [[p / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for p in range(nb_p)]
    )


def right():
    theta = torch.tensor(table(6, 4), dtype=torch.float32)
    return {"E": torch.where(torch.arange(4) % 2 == 0, theta.sin(), theta.cos())}


def create_sinusoidal_embeddings(nb_p, dim, E):
    theta = table(nb_p, dim)
    E[:, 0::2] = torch.FloatTensor(np.sin(theta[:, 0::2]))  # cause
    E[:, 1::2] = torch.FloatTensor(np.cos(theta[:, 1::2]))
    E.detach_()
    E.requires_grad = False


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab_size, max_position_embeddings):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, d_model, padding_idx=1)
        self.position_embeddings = nn.Embedding(max_position_embeddings, d_model)
        create_sinusoidal_embeddings(
            nb_p=max_position_embeddings, dim=d_model, E=self.position_embeddings.weight
        )


embeddings = Embeddings(d_model=4, vocab_size=10, max_position_embeddings=6)
GRADS = {"E": embeddings.position_embeddings.weight.detach()}
