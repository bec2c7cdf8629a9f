"""function_gradient_shape: a custom Function's backward returns a gradient of the wrong shape."""

import torch


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.sum()


x = torch.randn(3, requires_grad=True)
Double.apply(x).sum().backward()  # cause
