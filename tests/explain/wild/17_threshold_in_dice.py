"""no_graph: a threshold added to the Dice loss turns the predictions into a 0/1 mask before the
score is computed.

https://github.com/qubvel-org/segmentation_models.pytorch/pull/611
Threshold for Dice loss
"""

import torch
from torch import nn


def _threshold(x, threshold=None):
    if threshold is not None:
        return (x > threshold).type(x.dtype)  # cause
    return x


def f_score(pr, gt, beta=1, eps=1e-7, threshold=None):
    pr = _threshold(pr, threshold=threshold)
    tp = torch.sum(gt * pr)
    fp = torch.sum(pr) - tp
    fn = torch.sum(gt) - tp
    return ((1 + beta**2) * tp + eps) / ((1 + beta**2) * tp + beta**2 * fn + fp + eps)


class DiceLoss(nn.Module):
    def __init__(self, threshold=None):
        super().__init__()
        self.threshold = threshold

    def forward(self, y_pr, y_gt):
        return 1 - f_score(y_pr, y_gt, threshold=self.threshold)


torch.manual_seed(0)
model = nn.Conv2d(3, 1, 1)
x, gt = torch.randn(2, 3, 4, 4), (torch.randn(2, 1, 4, 4) > 0).float()
loss = DiceLoss(threshold=0.5)(torch.sigmoid(model(x)), gt)
loss.backward()
