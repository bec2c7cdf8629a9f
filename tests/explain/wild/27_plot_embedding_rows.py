"""numpy_requires_grad: rows of a token embedding table are plotted; the rows come from the
weight, which requires grad (plt.plot stood in for by a list).

https://github.com/tkalayci71/embedding-inspector/issues/22
RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""

import torch
from torch import nn

lines = []


def plot(xs, ys):  # stands for plt.plot
    lines.append((xs, ys))


def right():
    torch.manual_seed(0)
    return {"last": nn.Embedding(10, 4).weight[5].detach()}


torch.manual_seed(0)
embedding = nn.Embedding(10, 4)
emb_vec = embedding.weight[[3, 5]]
x = torch.arange(emb_vec.shape[1])
for u in range(len(emb_vec)):
    plot(x.numpy(), emb_vec[u].numpy())  # cause
GRADS = {"last": torch.from_numpy(lines[-1][1].copy())}
