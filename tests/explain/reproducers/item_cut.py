"""no_graph: a loss rebuilt from a Python number."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
value = (w**2).sum().item()  # cause
loss = torch.tensor(value)
loss.backward()
