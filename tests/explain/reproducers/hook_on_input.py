"""hook_no_grad: a hook on an input that does not require grad."""

import torch

x = torch.randn(3)
x.register_hook(lambda grad: print(grad))  # cause
