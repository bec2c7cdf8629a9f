"""no_graph: the loss computed under torch.no_grad()."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
with torch.no_grad():  # cause
    loss = (w * 2).sum()
loss.backward()
