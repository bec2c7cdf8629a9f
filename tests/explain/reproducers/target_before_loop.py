"""backward_twice: a target made once, before the loop, from a tensor that requires grad."""

import torch

torch.manual_seed(0)
teacher = torch.randn(3, requires_grad=True)
w = torch.zeros(3, requires_grad=True)
target = teacher.exp()  # cause
for _ in range(2):
    loss = ((w - target) ** 2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
GRADS = {"w": w.detach()}
