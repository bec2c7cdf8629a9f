"""requires_grad_dtype: requires_grad set on the indices torch.max returns (a LongTensor), to make
a loss of the predicted classes differentiable.

https://github.com/pytorch/pytorch/issues/95110
RuntimeError: only Tensors of floating point and complex dtype can require gradients
"""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
x, labels = torch.randn(6, 4), torch.randint(0, 3, (6,))
outputs = model(x)
_, predicted = torch.max(outputs, 1)
predicted.requires_grad = True  # cause
loss = (predicted != labels).float().mean()
loss.backward()
