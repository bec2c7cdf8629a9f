"""inplace_saved: one element of sigmoid's output, which sigmoid saved, is overwritten.

https://github.com/pytorch/pytorch/issues/9391
backward pass different behaviors with inplace operation
"""

import torch


def right():
    a = torch.tensor([1, 2, 3.0])
    s = a.sigmoid()
    grad = s * (1 - s)
    grad[1] = 0  # the overwritten element no longer depends on a
    return {"a": grad}


a = torch.tensor([1, 2, 3.0], requires_grad=True)
b = a.sigmoid()
b[1] = 2  # cause
b.sum().backward()
GRADS = {"a": a.grad}
