"""backward_twice: the generator's adversarial loss and its style-code reconstruction loss come
from one forward pass; each gets its own backward().

https://github.com/naver-ai/StyleMapGAN/issues/16
RuntimeError: Trying to backward through the graph a second time
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    encoder, generator, discriminator = nn.Linear(4, 3), nn.Linear(3, 4), nn.Linear(4, 1)
    return encoder, generator, discriminator, torch.randn(5, 4)


def model(encoder, generator, discriminator, real):
    stylecode = torch.tanh(encoder(real))
    fake = generator(stylecode)
    adv_loss = -discriminator(fake).mean()
    w_rec_loss = (torch.tanh(encoder(fake)) - stylecode).pow(2).mean()
    return adv_loss, w_rec_loss, stylecode


def right():  # the thread's own fix: one backward of the sum
    encoder, generator, discriminator, real = setup()
    adv_loss, w_rec_loss, _ = model(encoder, generator, discriminator, real)
    (adv_loss * 1.0 + w_rec_loss * 0.5).backward()
    return {"generator.weight": generator.weight.grad}


encoder, generator, discriminator, real = setup()
lambda_adv_loss, lambda_w_rec_loss = 1.0, 0.5
adv_loss, w_rec_loss, stylecode = model(encoder, generator, discriminator, real)
g_loss = adv_loss * lambda_adv_loss
g_loss.backward()  # cause
(w_rec_loss * lambda_w_rec_loss).backward()
GRADS = {"generator.weight": generator.weight.grad}
