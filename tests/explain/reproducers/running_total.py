"""numpy_requires_grad: each step's loss added to a running total as a tensor, then plotted."""

import numpy as np
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
total = 0
for _ in range(2):
    loss = (w * torch.randn(3)).pow(2).sum()
    total += loss  # cause
    loss.backward()
curve = np.array([total])  # what plt.plot(curve) does with it
GRADS = {"curve": torch.tensor(curve, dtype=torch.float32)}
