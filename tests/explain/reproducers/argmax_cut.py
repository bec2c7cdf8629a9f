"""no_graph: a loss computed from argmax, which returns integers."""

import torch

torch.manual_seed(0)
scores = torch.randn(4, 3, requires_grad=True)
predicted = scores.argmax(dim=1)  # cause
loss = (predicted.float() - 1).pow(2).mean()
loss.backward()
