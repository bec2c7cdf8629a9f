"""inplace_saved: the critic's optimizer steps before the actor's loss, which used the critic,
goes backward (MADDPG, update order swapped to follow the paper).

https://github.com/starry-sky6688/MADDPG/issues/27
大佬请问这边当我先更新critic时再更新actor（论文是这样的）这个会报因为inplace操作导致梯度的更新失败
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 2), nn.Linear(6, 1)
    o, r = torch.randn(8, 4), torch.randn(8, 1)
    return actor, critic, o, r


def right():  # the actor learns from the critic as it was when actor_loss was computed
    actor, critic, o, _ = setup()
    u = actor(o)
    actor_loss = -critic(torch.cat([o, u], dim=1)).mean()
    actor_loss.backward()
    return {"actor.weight": actor.weight.grad}


actor, critic, o, r = setup()
actor_optim = torch.optim.SGD(actor.parameters(), lr=0.1)
critic_optim = torch.optim.SGD(critic.parameters(), lr=0.1)
u = actor(o)
actor_loss = -critic(torch.cat([o, u], dim=1)).mean()
critic_loss = (critic(torch.cat([o, u.detach()], dim=1)) - r).pow(2).mean()

critic_optim.zero_grad()
critic_loss.backward()
critic_optim.step()  # cause

actor_optim.zero_grad()
actor_loss.backward()
actor_optim.step()
GRADS = {"actor.weight": actor.weight.grad}
