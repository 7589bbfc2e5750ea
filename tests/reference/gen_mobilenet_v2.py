#!/usr/bin/python3
"""Writes tests/data/mobilenet_v2/ from torchvision's MobileNetV2 (python3-torchvision 0.14):

  <state key>.npy        every state_dict entry of mobilenet_v2(width_mult=0.25, round_nearest=4,
                         num_classes=10): torchvision's real block structure (the same residual
                         pattern as the full network), small enough to commit
  input.npy              (1, 3, 32, 32)
  output.npy             the eval-mode output, computed in float64 and rounded once
  torchvision_keys.txt   "<key> <d0,d1,...>" for every state_dict entry of the default
                         mobilenet_v2() (width 1.0, 1000 classes): names and shapes only

Deterministic: the generator is seeded by the folder name. Run from anywhere, after
gen_goldens.py (which deletes every tests/data subfolder it does not own).
"""

import shutil

import torch
import torchvision
from torch import nn

from gen_modules import DATA, in_float64, randn, save, seeded, uniform

OUT = DATA / "mobilenet_v2"


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)

    full = torchvision.models.mobilenet_v2()
    with open(OUT / "torchvision_keys.txt", "w") as f:
        for key, value in full.state_dict().items():
            f.write(f"{key} {','.join(str(d) for d in value.shape)}\n")

    g = seeded("mobilenet_v2")
    net = torchvision.models.mobilenet_v2(width_mult=0.25, round_nearest=4, num_classes=10)
    # Calibrated running statistics (activations stay normalised through 52 layers), then random
    # affine parameters, as for the ResNet-18 golden.
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    net.train()
    with torch.no_grad():
        net(randn(g, 8, 3, 32, 32))
    for bn in bns:
        bn.momentum = 0.1
        with torch.no_grad():
            bn.weight.copy_(uniform(g, bn.num_features, low=0.5, high=1.5))
            bn.bias.copy_(randn(g, bn.num_features, scale=0.2))
    x = randn(g, 1, 3, 32, 32)
    for key, value in net.state_dict().items():
        save(OUT / f"{key}.npy", value)
    save(OUT / "input.npy", x)
    out, _ = in_float64(net, False, x)
    save(OUT / "output.npy", out)


if __name__ == "__main__":
    main()
