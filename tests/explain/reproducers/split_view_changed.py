"""view_inplace: one output of split() changed in place."""

import torch

torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
first, second = (x * 2).split(2)
first.mul_(3)  # cause
