"""inplace_saved: a hidden state carried from step to step; `retain_graph=True` silenced the
second backward through the last step's graph, and the next backward meets the weight that
optimizer.step() changed."""

import torch

torch.manual_seed(0)
w = torch.randn(3, 3, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
h = torch.zeros(3)
for _ in range(3):
    optimizer.zero_grad()
    h = torch.tanh(w @ h + torch.randn(3))  # cause
    loss = h.pow(2).sum()
    loss.backward(retain_graph=True)
    optimizer.step()
GRADS = {"w": w.grad}
