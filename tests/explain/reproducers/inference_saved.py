"""inference_saved: a tensor made under inference_mode, saved for backward."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
with torch.inference_mode():
    features = torch.randn(3) * 2
loss = (w * features).sum()  # cause
loss.backward()
