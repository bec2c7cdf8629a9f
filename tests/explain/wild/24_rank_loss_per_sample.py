"""scalar_output: a pairwise rank loss between two scales of the network returns one value per
sample, and goes backward as it is once the batch holds more than one image.

https://github.com/dillondavis/RecurrentAttentionConvolutionalNeuralNetwork/issues/4
RuntimeError: grad can be implicitly created only for scalar outputs
"""

import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    heads = nn.ModuleList([nn.Linear(5, 3) for _ in range(2)])
    return heads, torch.randn(4, 5), torch.randint(0, 3, (4,))


def right():  # the thread's fix: the loss averaged over the batch
    heads, x, label = setup()
    scores = [head(x) for head in heads]
    ps1 = F.softmax(scores[0], dim=1).gather(1, label.view(-1, 1))
    ps2 = F.softmax(scores[1], dim=1).gather(1, label.view(-1, 1))
    torch.clamp(ps1 - ps2 + 0.05, min=0).mean().backward()
    return {"head0": heads[0].weight.grad}


def criterion_rank(score1, score2, target, margin=0.05):
    ps1 = F.softmax(score1, dim=1).gather(1, target.view(-1, 1))
    ps2 = F.softmax(score2, dim=1).gather(1, target.view(-1, 1))
    return torch.clamp(ps1 - ps2 + margin, min=0)  # cause


heads, x, label = setup()
scores = [head(x) for head in heads]
retain_graph = False
for i in range(1, len(scores)):
    criterion_rank(scores[i - 1], scores[i], label).backward(retain_graph=retain_graph)
GRADS = {"head0": heads[0].weight.grad}
