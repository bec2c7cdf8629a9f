"""leaf_inplace: a manual update of a weight outside no_grad."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
(w**2).sum().backward()
w -= 0.1 * w.grad  # cause
GRADS = {"w": w.detach().clone()}
