"""requires_grad_dtype: the documentation's example of torch.enable_grad made its tensor from an
integer, `torch.tensor([1], requires_grad=True)`.

https://github.com/pytorch/pytorch/issues/53466
RuntimeError: Only Tensors of floating point and complex dtype can require gradients
"""

import torch


def right():
    return {"x": torch.tensor([2.0])}


x = torch.tensor([1], requires_grad=True)  # cause
with torch.no_grad():
    with torch.enable_grad():
        y = x * 2
y.backward()
GRADS = {"x": x.grad}
