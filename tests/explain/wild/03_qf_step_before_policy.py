"""inplace_saved: soft actor-critic updates the Q-function before the policy loss, which went
through the Q-function, goes backward.

https://github.com/rail-berkeley/rlkit/pull/109
Optimize actor before the critic
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    policy, qf = nn.Linear(3, 1), nn.Linear(4, 1)
    obs, actions, q_target = torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1)
    return policy, qf, obs, actions, q_target


def right():
    policy, qf, obs, _, _ = setup()
    new_actions = torch.tanh(policy(obs))
    policy_loss = -qf(torch.cat([obs, new_actions], dim=1)).mean()
    policy_loss.backward()
    return {"policy.weight": policy.weight.grad}


policy, qf, obs, actions, q_target = setup()
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
qf_optimizer = torch.optim.Adam(qf.parameters(), lr=1e-3)

new_actions = torch.tanh(policy(obs))
policy_loss = -qf(torch.cat([obs, new_actions], dim=1)).mean()
q_pred = qf(torch.cat([obs, actions], dim=1))
qf_loss = (q_pred - q_target).pow(2).mean()

qf_optimizer.zero_grad()
qf_loss.backward()
qf_optimizer.step()  # cause

policy_optimizer.zero_grad()
policy_loss.backward()
policy_optimizer.step()
GRADS = {"policy.weight": policy.weight.grad}
