"""numpy_requires_grad: .numpy() of an output to plot it."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
out = w * 2
values = out.numpy()  # cause
GRADS = {"values": torch.from_numpy(values.copy())}
