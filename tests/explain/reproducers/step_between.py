"""inplace_saved: an optimizer's step() between a loss and its backward (a GAN written in the
wrong order): the step changes the weight the loss saved."""

import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Linear(3, 1)
optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)
fake = torch.randn(4, 3, requires_grad=True)
loss_g = critic(fake).sum()
loss_c = critic(fake.detach()).sum()
loss_c.backward()
optimizer.step()  # cause
loss_g.backward()
