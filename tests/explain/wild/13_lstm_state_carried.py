"""backward_twice: an LSTM's (h0, c0) carried from batch to batch without detaching, so the
second batch's backward reaches into the first batch's freed graph.

https://blog.csdn.net/windhawk_fly/article/details/143405685
LSTM: Trying to backward through the graph a second time, then modified by an inplace operation
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 6)
    batches = [(torch.randn(5, 2, 3), torch.randn(5, 2, 6)) for _ in range(3)]
    h0, c0 = torch.randn(1, 2, 6), torch.randn(1, 2, 6)
    return lstm, batches, h0, c0


def right():
    lstm, data_loader, h0, c0 = setup()
    optimizer = torch.optim.SGD(lstm.parameters(), lr=0.1)
    for batch in data_loader:
        optimizer.zero_grad()
        output, (h0, c0) = lstm(batch[0], (h0.detach(), c0.detach()))
        nn.functional.mse_loss(output, batch[1]).backward()
        optimizer.step()
    return {"weight_ih_l0": lstm.weight_ih_l0.grad}


lstm, data_loader, h0, c0 = setup()
optimizer = torch.optim.SGD(lstm.parameters(), lr=0.1)
loss_fn = nn.MSELoss()
for batch in data_loader:
    optimizer.zero_grad()
    output, (h0, c0) = lstm(batch[0], (h0, c0))  # cause
    loss = loss_fn(output, batch[1])
    loss.backward()
    optimizer.step()
GRADS = {"weight_ih_l0": lstm.weight_ih_l0.grad}
