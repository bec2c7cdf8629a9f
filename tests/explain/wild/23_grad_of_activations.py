"""scalar_output: torch.autograd.grad of a unit's activations (one per image) with respect to
the latent vectors, without saying how to weigh them.

https://github.com/Animadversio/GAN-Geometry/issues/4
When I use GANForwardHVPOperator, I find some errors reported
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    G, objective = nn.Sequential(nn.Linear(8, 16), nn.Tanh()), nn.Linear(16, 1)
    return G, objective, torch.randn(3, 8, requires_grad=True)


def right():  # the thread's own fix: the mean of the activations
    G, objective, perturb_vecs = setup()
    activs = objective(G(perturb_vecs)).squeeze(1)
    return {"ftgrad": torch.autograd.grad(activs.mean(), perturb_vecs)[0]}


G, objective, perturb_vecs = setup()
img = G(perturb_vecs)
activs = objective(img).squeeze(1)
ftgrad_both = torch.autograd.grad(activs, perturb_vecs, retain_graph=False)[0]  # cause
GRADS = {"ftgrad": ftgrad_both}
