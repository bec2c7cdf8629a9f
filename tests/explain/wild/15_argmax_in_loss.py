"""no_graph: the loss is computed from the argmax of the softmax (hard predictions), not from
the logits.

https://php.bkmy88.com/faq/1835025.html
PyTorch训练中no grad错误的诊断与修复
"""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
loss_fn = nn.MSELoss()
optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
X_train, y_train = torch.randn(16, 4), torch.randint(0, 3, (16,)).float()
for epoch in range(2):  # noqa: B007
    model.train()
    train_logits = model(X_train)
    train_preds_probs = torch.softmax(train_logits, 1).argmax(1).type(torch.float32)  # cause
    loss = loss_fn(train_preds_probs, y_train)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
