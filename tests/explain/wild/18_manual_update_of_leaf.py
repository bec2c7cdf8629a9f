"""leaf_inplace: a manual gradient step on a leaf that requires grad, outside no_grad.

https://github.com/BaiTheBest/SparseLLM/issues/13
How to fix this problem?
"""

import torch


def setup():
    torch.manual_seed(0)
    return torch.randn(4, 3, requires_grad=True), torch.randn(3, 2), torch.randn(4, 2)


def right():
    s_batch, W, target = setup()
    s = s_batch.detach()
    for _ in range(2):
        s = s - 0.1 * 2 * (s @ W - target) @ W.T / 8  # d/ds of the mean squared error
    return {"s_batch": s}


s_batch, W, target = setup()
s_learning_rate = 0.1
for _ in range(2):
    loss_s = ((s_batch @ W - target) ** 2).mean()
    loss_s.backward()
    s_batch -= s_learning_rate * s_batch.grad  # cause
    s_batch.grad.zero_()
GRADS = {"s_batch": s_batch.detach()}
