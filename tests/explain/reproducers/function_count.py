"""function_gradient_count: a custom Function's backward returns too few gradients."""

import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k


x = torch.randn(3, requires_grad=True)
k = torch.tensor(2.0, requires_grad=True)
Scale.apply(x, k).sum().backward()  # cause
