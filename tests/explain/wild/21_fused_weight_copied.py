"""leaf_inplace: a conv and its batch norm are fused for testing by copying the fused weight into
a new conv's weight with slice assignment.

https://github.com/PingoLH/FCHarDNet/issues/61
RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    conv, bn, cconv = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Conv2d(3, 4, 3)
    bn.running_var.uniform_(0.5, 2.0)
    return conv, bn, cconv


def right():
    conv, bn, _ = setup()
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return {"cconv.weight": (conv.weight * scale.view(-1, 1, 1, 1)).detach()}


conv, bn, cconv = setup()
W = conv.weight * (bn.weight / torch.sqrt(bn.running_var + bn.eps)).view(-1, 1, 1, 1)
cconv.weight[:, :, :, :] = W[:, :, :, :]  # cause
GRADS = {"cconv.weight": cconv.weight.detach()}
