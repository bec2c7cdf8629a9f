"""numpy_requires_grad: the server averages the clients' test losses with np.sum over a list of
loss tensors that still require grad.

https://github.com/zhuangdizhu/FedGen/issues/1
Can't call numpy() on Tensor that requires grad
"""

import numpy as np
import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    batches = [(torch.randn(10, 3), torch.randn(10, 1)), (torch.randn(20, 3), torch.randn(20, 1))]
    return model, batches


def right():
    model, batches = setup()
    losses = [nn.functional.mse_loss(model(x), y).item() * len(x) for x, y in batches]
    return {"glob_loss": torch.tensor(sum(losses) / 30)}


model, batches = setup()
test_samples = [len(x) for x, _ in batches]
test_losses = [nn.functional.mse_loss(model(x), y) for x, y in batches]
glob_loss = np.sum([x * y for (x, y) in zip(test_samples, test_losses)]).item() / np.sum(test_samples)  # noqa: B905, E501  # cause
GRADS = {"glob_loss": torch.tensor(float(glob_loss))}
