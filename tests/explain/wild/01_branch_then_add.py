"""inplace_saved: a conv's output feeds a second branch, then `x +=` adds to it in place.

https://discuss.pytorch.org/t/when-would-the-error-one-of-the-variables-needed-for-gradient-computation-has-been-modified-occur/11976
When would the error "one of the variables needed for gradient computation has been modified" occur?
"""

import torch
from torch import nn


def right():
    torch.manual_seed(0)
    conv1, conv1_p = nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(2, 2, 3, padding=1)
    some_layer, input = torch.randn(1, 2, 4, 4), torch.randn(1, 1, 4, 4)
    x = conv1(input)
    x_p = conv1_p(x)
    x = x + some_layer
    (x.sum() + x_p.sum()).backward()
    return {"conv1.weight": conv1.weight.grad}


torch.manual_seed(0)
conv1, conv1_p = nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(2, 2, 3, padding=1)
some_layer, input = torch.randn(1, 2, 4, 4), torch.randn(1, 1, 4, 4)
x = conv1(input)  # main branch
x_p = conv1_p(x)  # another branch
x += some_layer  # cause
(x.sum() + x_p.sum()).backward()
GRADS = {"conv1.weight": conv1.weight.grad}
