"""backward_twice: two losses from one Bernoulli distribution, each with its own backward(); the
distribution computed its logits once, and the first backward freed them.

https://github.com/pytorch/pytorch/issues/11192
Cannot Backward Twice Through Distribution
"""

import torch
from torch.distributions import Bernoulli


def right():
    p = torch.tensor(0.2, requires_grad=True)
    pi = Bernoulli(p)
    (2 * pi.log_prob(torch.tensor(1.0)) + 3 * pi.log_prob(torch.tensor(0.0))).backward()
    return {"p": p.grad}


p = torch.tensor(0.2, requires_grad=True)
pi = Bernoulli(p)
l1 = 2 * pi.log_prob(torch.tensor(1.0))
l2 = 3 * pi.log_prob(torch.tensor(0.0))
l1.backward()  # cause
l2.backward()
GRADS = {"p": p.grad}
