"""inplace_saved: nn.RNN's documented Python equivalent writes each layer's state into h_t in
place, after the next layer read h_t[layer - 1].

https://github.com/pytorch/pytorch/issues/165621
Feedback about RNN
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    rnn = nn.RNN(4, 5, 2)
    return rnn, dict(rnn.named_parameters()), torch.randn(3, 2, 4), torch.randn(2, 2, 5)


def step(params, layer, input_t, h):
    return (
        input_t @ params[f"weight_ih_l{layer}"].T
        + h @ params[f"weight_hh_l{layer}"].T
        + params[f"bias_hh_l{layer}"]
        + params[f"bias_ih_l{layer}"]
    )


def right():  # the fix merged for the issue: a fresh list per time step
    rnn, params, x, hx = setup()
    h_t_minus_1, output = list(hx), []
    for t in range(x.size(0)):
        h_t = []
        for layer in range(rnn.num_layers):
            input_t = x[t] if layer == 0 else h_t[layer - 1]
            h_t.append(torch.tanh(step(params, layer, input_t, h_t_minus_1[layer])))
        output.append(h_t[-1])
        h_t_minus_1 = h_t
    torch.stack(output).sum().backward()
    return {"weight_ih_l1": rnn.weight_ih_l1.grad}


def forward(x, hx):
    seq_len, batch_size, _ = x.size()  # noqa: RUF059
    h_t_minus_1 = hx.clone()
    h_t = hx.clone()
    output = []
    for t in range(seq_len):
        for layer in range(rnn.num_layers):
            input_t = x[t] if layer == 0 else h_t[layer - 1]
            pre = step(params, layer, input_t, h_t_minus_1[layer])
            h_t[layer] = torch.tanh(pre)  # cause
        output.append(h_t[-1].clone())
        h_t_minus_1 = h_t.clone()
    return torch.stack(output), h_t


rnn, params, input, h0 = setup()
output, hn = forward(input, h0)
output.sum().backward()
GRADS = {"weight_ih_l1": rnn.weight_ih_l1.grad}
