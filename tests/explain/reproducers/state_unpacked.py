"""backward_twice: an LSTM's state carried by tuple unpacking, in a function; the same names are
bound in another function too."""

import torch
from torch import nn


def initial():
    h, c = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    return h, c


def train(lstm, batches):
    h, c = initial()
    for x in batches:
        out, (h, c) = lstm(x, (h, c))  # cause
        out.pow(2).mean().backward()
    return lstm.weight_ih_l0.grad


torch.manual_seed(0)
lstm = nn.LSTM(3, 4)
GRADS = {"w": train(lstm, [torch.randn(5, 2, 3) for _ in range(2)])}
