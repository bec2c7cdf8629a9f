"""share_nonleaf: a result that requires grad handed to another process."""

import torch
import torch.multiprocessing as mp

w = torch.randn(3, requires_grad=True)
features = w * 2
process = mp.get_context("spawn").Process(target=print, args=(features,))
process.start()  # cause
