"""backward_twice: a feature computed once, before the loop, from the weight the loop trains."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
feature = w.exp()  # cause
for _ in range(2):
    loss = (feature * x).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
