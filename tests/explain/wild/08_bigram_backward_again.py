"""backward_twice: the bigram model's forward pass ran once, its backward-and-update twice (the
notebook's backward cell run again without the forward cell).

https://github.com/karpathy/nn-zero-to-hero/issues/31
RuntimeError: Trying to backward through the graph a second time
"""

import torch
import torch.nn.functional as F


def setup():
    g = torch.Generator().manual_seed(2147483647)
    xs, ys = torch.tensor([0, 5, 13, 13, 1]), torch.tensor([5, 13, 13, 1, 0])
    W = torch.randn((27, 27), generator=g, requires_grad=True)
    return xs, ys, W, F.one_hot(xs, num_classes=27).float()


def right():  # a forward pass before every backward
    _, ys, W, xenc = setup()
    for _ in range(2):
        counts = (xenc @ W).exp()
        prob = counts / counts.sum(1, keepdims=True)
        loss = -prob[torch.arange(5), ys].log().mean()
        W.grad = None
        loss.backward()
        W.data += -0.1 * W.grad
    return {"W": W.grad}


xs, ys, W, xenc = setup()
# forward pass
logits = xenc @ W
counts = logits.exp()
prob = counts / counts.sum(1, keepdims=True)
loss = -prob[torch.arange(5), ys].log().mean()
for _ in range(2):
    # backward pass
    W.grad = None
    loss.backward()  # cause
    # update
    W.data += -0.1 * W.grad
GRADS = {"W": W.grad}
