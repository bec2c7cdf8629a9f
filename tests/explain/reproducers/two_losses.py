"""backward_twice: two losses that share a sub-graph, each with its own backward()."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
h = torch.sigmoid(w * 2)
loss_a = h.sum()
loss_b = (h * 3).sum()
loss_a.backward()  # cause
loss_b.backward()
