"""inplace_saved: a slice assignment into a tensor that exp() saved as its output."""

import torch

torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
e = x.exp()
total = e.sum() * 2
e[0] = 0  # cause
(total + e.sum()).backward()
GRADS = {"x": x.grad}
