"""ddp_ready_twice: one layer wrapped in two reentrant checkpoints, under DDP."""

import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class TwiceThroughOneLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        h = checkpoint(self.layer, x, use_reentrant=True)
        return checkpoint(self.layer, h, use_reentrant=True)  # a second backward of its own


store = dist.FileStore(tempfile.NamedTemporaryFile(delete=False).name, 1)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)  # DDP needs a group
try:
    torch.manual_seed(0)
    model = DistributedDataParallel(TwiceThroughOneLayer(), find_unused_parameters=True)
    x = torch.randn(2, 4, requires_grad=True)  # reentrant checkpoints need an input that does
    model(x).sum().backward()  # cause
finally:
    dist.destroy_process_group()
