"""backward_twice, beside a view made and changed under no_grad (reading its grad_fn raises)."""

import torch

torch.manual_seed(0)
embedding = torch.randn(5, 3, requires_grad=True)
with torch.no_grad():
    padding = embedding[0]
    padding.zero_()
w = torch.randn(3, requires_grad=True)
h = torch.sigmoid(w * 2)
loss_a = h.sum()
loss_b = (h * 3).sum()
loss_a.backward()  # cause
loss_b.backward()
