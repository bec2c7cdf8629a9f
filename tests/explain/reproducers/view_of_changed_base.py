"""inplace_saved: a row of a buffer is saved by a matmul, then the buffer's next rows are
written in place (the row is a view: it shares the version count of the whole buffer)."""

import torch

torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
x = torch.randn(4)
buffer = torch.zeros(4, 4)
buffer[0] = x @ w
out = buffer[0] @ w
for step in range(1, 4):
    buffer[step] = buffer[step - 1] * 2  # cause
out.sum().backward()
GRADS = {"w": w.grad}
