"""leaf_inplace: the word language model example's hand-written SGD step, `p.add_(...)` on each
parameter, outside no_grad (the thread's `p.add_(-lr, p.grad)`, written with today's signature).

https://github.com/pytorch/examples/pull/779
[word_language_model] Fix grad in-place operation
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
    data, targets = torch.randint(0, 10, (6,)), torch.randint(0, 10, (6,))
    return model, data, targets


def right():
    model, data, targets = setup()
    for _ in range(2):
        model.zero_grad()
        nn.CrossEntropyLoss()(model(data), targets).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.5)
    return {"decoder": model[1].weight.detach()}


model, data, targets = setup()
criterion, lr = nn.CrossEntropyLoss(), 0.5
for batch in range(2):  # noqa: B007
    model.zero_grad()
    output = model(data)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.add_(p.grad, alpha=-lr)  # cause
GRADS = {"decoder": model[1].weight.detach()}
