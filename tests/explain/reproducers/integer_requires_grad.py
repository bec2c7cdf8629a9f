"""requires_grad_dtype: requires_grad on an integer tensor."""

import torch

steps = torch.arange(4).requires_grad_()  # cause
(steps * 2).sum().backward()
GRADS = {"steps": steps.grad}
