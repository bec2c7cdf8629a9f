"""no_graph: a LightningModule's test_step calls backward(); the Trainer runs test_step with
gradients off (inference mode), here written out around the call.

https://github.com/Lightning-AI/pytorch-lightning/issues/19910
element 0 of tensors does not require grad and does not have a grad_fn in "test_step"
"""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
batch = (torch.randn(8, 4), torch.randint(0, 3, (8,)))


def test_step(batch, batch_idx):
    x, y = batch
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss


with torch.inference_mode():  # cause
    test_step(batch, 0)
