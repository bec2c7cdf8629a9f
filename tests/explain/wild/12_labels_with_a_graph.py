"""backward_twice: the synthetic labels Y are made from weights that require grad, so every
batch's loss reaches back into the one graph that made Y.

https://github.com/zhangyu2234/Deep-learning-by-hand
Deep learning by hand (notebook): Trying to backward through the graph a second time
"""

import torch


def fc(x, w, b):
    return torch.relu(torch.mm(x, w) + b)


def loss(y_hat, y):
    return ((y_hat - y) ** 2 / 2).sum()


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def run(labels_need_grad):
    torch.manual_seed(0)
    X = torch.randn((40, 2))
    true_W = torch.randn((2, 1), requires_grad=labels_need_grad)
    true_b = torch.randn(1, requires_grad=labels_need_grad)
    Y = torch.mm(X, true_W) + true_b
    W = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(2):
        for i in range(0, 40, 20):
            loss(fc(X[i : i + 20], W, b), Y[i : i + 20]).backward()
            sgd([W, b], 0.03, 20)
    return {"W": W.detach()}


def right():
    return run(labels_need_grad=False)


torch.manual_seed(0)
num_samples, num_features, num_hiddens = 40, 2, 2
X = torch.randn((num_samples, num_features))
true_W = torch.randn((num_hiddens, 1), requires_grad=True)
true_b = torch.randn(1, requires_grad=True)
Y = torch.mm(X, true_W) + true_b  # cause
W = torch.normal(0, 0.01, size=(num_hiddens, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
batch_size, lr = 20, 0.03
dataloader = [(X[i : i + batch_size], Y[i : i + batch_size]) for i in range(0, 40, batch_size)]
for epoch in range(2):  # noqa: B007
    for x, y in dataloader:
        l = loss(fc(x, W, b), y)  # noqa: E741
        l.backward()
        sgd([W, b], lr, batch_size)
GRADS = {"W": W.detach()}
