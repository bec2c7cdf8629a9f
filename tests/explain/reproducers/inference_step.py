"""no_graph: a step that trains, called from inside torch.inference_mode()."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
x, y = torch.randn(8, 4), torch.randn(8, 1)


def step():
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()


with torch.inference_mode():  # cause
    step()
