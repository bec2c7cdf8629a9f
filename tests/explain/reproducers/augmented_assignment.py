"""inplace_saved: `+=` on a tensor that pow saved as its input."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
h = w * 2
y = h**2
h += 1  # cause
y.sum().backward()
GRADS = {"w": w.grad}
