"""numpy_requires_grad: each epoch's loss is summed as tensors (`train_loss += loss`, not
`loss.item()`), and the loss curves are then plotted (plt.plot stood in for by np.array).

https://github.com/mrdbourke/pytorch-deep-learning/issues/583
04_pytorch_custom_datasets.ipynb: .detach() required by matplotlib when plotting loss curves
"""

import numpy as np
import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)]
    return model, batches


def train(model, batches, epochs, as_number):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    results = {"train_loss": []}
    for _ in range(epochs):
        train_loss = 0
        for X, y in batches:
            loss = nn.functional.mse_loss(model(X), y)
            train_loss += loss.item() if as_number else loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        results["train_loss"].append(train_loss / len(batches))
    return results


def right():
    model, batches = setup()
    return {"curve": torch.tensor(train(model, batches, 2, as_number=True)["train_loss"])}


def plot_loss_curves(results):
    loss = results["train_loss"]
    return np.array(loss)  # stands for plt.plot(epochs, loss)


model, batches = setup()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
results = {"train_loss": []}
for epoch in range(2):  # noqa: B007
    train_loss = 0
    for X, y in batches:
        y_pred = model(X)
        loss = nn.functional.mse_loss(y_pred, y)
        train_loss += loss  # cause
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    train_loss = train_loss / len(batches)
    results["train_loss"].append(train_loss)
GRADS = {"curve": torch.tensor(plot_loss_curves(results), dtype=torch.float32)}
