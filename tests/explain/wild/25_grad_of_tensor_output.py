"""scalar_output: torch.autograd.grad of a whole tensor Y with respect to X, as TensorFlow's
tf.gradients(ys=Y, xs=X) would take it.

https://stackoverflow.com/questions/54754153/autograd-grad-for-tensor-in-pytorch
Autograd.grad() for Tensor in pytorch
"""

import torch
from torch.autograd import grad


def right():  # the answer's fix: grad_outputs of ones, which sums Y
    return {"x": 2 * (torch.ones(2, 2) + 2)}


x = torch.ones(2, 2, requires_grad=True)
v = x + 2
y = v**2
dy_hat_dx = grad(outputs=y, inputs=x)  # cause
GRADS = {"x": dy_hat_dx[0]}
