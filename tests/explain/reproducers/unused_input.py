"""unused_input: torch.autograd.grad of an input the output was not computed from."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
out = (w * 2).sum()
grads = torch.autograd.grad(out, [w, b])  # cause
