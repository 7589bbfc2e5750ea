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

import torchvision

from gen_modules import DATA, calibrate, randn, seeded, write_network

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
    calibrate(net, g, (8, 3, 32, 32))
    write_network(OUT, net, randn(g, 1, 3, 32, 32))


if __name__ == "__main__":
    main()
