"""inplace_saved: the output of exp(), which exp saved for its backward, is assigned into.

https://discuss.pytorch.org/t/when-inplace-operation-are-allowed-and-when-not/169583
When inplace operation are allowed and when not
"""

import torch


def right():
    t = torch.arange(3.0)
    return {"t": 2 * 2 * (2 * t).exp()}  # two backwards of sum(exp(2t)), the saved exp unchanged


t = torch.arange(3.0, requires_grad=True)
u = 2 * t  # (so it won't be a leaf variable)
uexp = u.exp()
loss = uexp.sum()
u[0] = 666  # inplace modification of u: exp saved its output, not u
loss.backward(retain_graph=True)  # okay
uexp[0] = 666  # cause
loss.backward()
GRADS = {"t": t.grad}
