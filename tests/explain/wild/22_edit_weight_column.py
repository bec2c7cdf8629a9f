"""leaf_inplace: knowledge editing subtracts and adds embeddings to one column of a dense
layer's weight, in place, with autograd on.

https://github.com/Hunter-DDM/knowledge-neurons/issues/14
RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(6, 4) for _ in range(2)])
    return layers, torch.randn(4), torch.randn(4)


def right():
    layers, ori_pred_emb, tgt_emb = setup()
    w = layers[1].weight.detach().clone()
    w[:, 2] += -ori_pred_emb * 0.5 + tgt_emb * 0.3
    return {"weight": w}


layers, ori_pred_emb, tgt_emb = setup()
layer, pos, lambda_1, lambda_2 = 1, 2, 0.5, 0.3
layers[layer].weight[:, pos] -= ori_pred_emb * lambda_1  # cause
layers[layer].weight[:, pos] += tgt_emb * lambda_2
GRADS = {"weight": layers[layer].weight.detach()}
