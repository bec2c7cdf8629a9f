"""backward_twice: the data is reshaped by a conv1d once, before the training loop, so every
step's loss reaches back into that one conv graph.

https://github.com/lucidrains/denoising-diffusion-pytorch/issues/109
RuntimeError: Trying to backward through the graph a second time
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    model, conv = nn.Linear(8, 8), nn.Conv1d(1, 1, 3, padding=1)
    return model, conv, torch.randn(4, 1, 8)


def right():  # the reshaping is preprocessing: no graph kept from it
    model, conv, raw = setup()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = conv(raw).squeeze(1).detach()
    for _ in range(2):
        optimizer.zero_grad()
        (model(data) - data).pow(2).mean().backward()
        optimizer.step()
    return {"model.weight": model.weight.grad}


model, conv, raw = setup()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = conv(raw).squeeze(1)  # cause
for step in range(2):  # noqa: B007
    optimizer.zero_grad()
    loss = (model(data) - data).pow(2).mean()
    loss.backward()
    optimizer.step()
GRADS = {"model.weight": model.weight.grad}
