"""backward_twice: the generator's adversarial loss goes backward, then the GDPP loss, built on
the same discriminator features of the same fake batch, goes backward too.

https://github.com/facebookresearch/pytorch_GAN_zoo/issues/83
I can't using GDPP config train any model
"""

import torch
from torch import nn


def setup():
    torch.manual_seed(0)
    netG, netD_features, netD_head = nn.Linear(4, 6), nn.Linear(6, 5), nn.Linear(5, 1)
    return netG, netD_features, netD_head, torch.randn(8, 4), torch.randn(8, 6)


def gdpp_loss(phi_real, phi_fake):
    return (phi_real.T @ phi_real - phi_fake.T @ phi_fake).pow(2).mean()


def right():  # one backward of both losses, as the paper adds them
    netG, netD_features, netD_head, z, real = setup()
    phiGFake = torch.tanh(netD_features(netG(z)))
    lossGFake = -netD_head(phiGFake).mean()
    phiDReal = torch.tanh(netD_features(real)).detach()
    (lossGFake + gdpp_loss(phiDReal, phiGFake)).backward()
    return {"netG.weight": netG.weight.grad}


netG, netD_features, netD_head, z, real = setup()
phiGFake = torch.tanh(netD_features(netG(z)))
predFakeG = netD_head(phiGFake)
lossGFake = -predFakeG.mean()
lossGFake.backward()  # cause
phiDReal = torch.tanh(netD_features(real)).detach()
lossGDPP = gdpp_loss(phiDReal, phiGFake)
lossGDPP.backward()
GRADS = {"netG.weight": netG.weight.grad}
