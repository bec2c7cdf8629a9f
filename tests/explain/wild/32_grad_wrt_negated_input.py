"""unused_input: torch.autograd.grad asked for the gradient with respect to `-x`, a new tensor the
output was never computed from.

https://github.com/ilia10000/dataset-distillation/issues/3
One of the differentiated Tensors appears to not have been used in the graph
"""

import torch


def right():
    return {"grad_x": torch.full((10,), 2.0)}


torch.manual_seed(0)
x = torch.rand(10, requires_grad=True)
output = (2 * x).sum()
(grad_x,) = torch.autograd.grad(output, -x)  # cause
GRADS = {"grad_x": grad_x}
