"""inplace_saved: an activation changed in place after another operation saved it."""

import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
h = x.sigmoid()
y = h * h
h.mul_(2)  # cause
y.sum().backward()
GRADS = {"x": x.grad}
