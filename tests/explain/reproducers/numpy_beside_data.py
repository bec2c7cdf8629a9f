"""numpy_requires_grad: two tensors handed to numpy on one line; only the second requires grad."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
steps = torch.arange(3)
pairs = list(zip(steps.numpy(), (w * 2).numpy(), strict=True))  # cause
GRADS = {"values": torch.tensor([float(v) for _, v in pairs])}
