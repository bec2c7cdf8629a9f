"""view_no_grad_inplace: a view made under no_grad, changed with grad on."""

import torch

torch.manual_seed(0)
h = torch.randn(4, requires_grad=True) * 2
with torch.no_grad():
    head = h[:2]
head.zero_()  # cause
