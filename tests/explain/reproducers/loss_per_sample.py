"""scalar_output: a loss function returns one value per sample, and its result goes backward as
it is."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
x, y = torch.randn(8, 4), torch.randn(8, 1)


def criterion(prediction, target):
    return (prediction - target).abs()  # cause


criterion(model(x), y).backward()
