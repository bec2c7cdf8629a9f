"""scalar_output: backward() from a tensor of several values."""

import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = x * 2
y.backward()  # cause
GRADS = {"x": x.grad}
