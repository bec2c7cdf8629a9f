"""backward_twice: a hidden state carried from one step into the next."""

import torch

torch.manual_seed(0)
w = torch.randn(3, 3, requires_grad=True)
h = torch.zeros(3)
for _ in range(3):
    x = torch.randn(3)
    h = torch.tanh(w @ h + x)  # cause
    loss = h.pow(2).sum()
    loss.backward()
GRADS = {"w": w.grad}
