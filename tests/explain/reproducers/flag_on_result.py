"""requires_grad_nonleaf: switching requires_grad off on a result."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
target = w * 2
target.requires_grad = False  # cause
loss = ((w - target) ** 2).sum()
loss.backward()
GRADS = {"w": w.grad}
