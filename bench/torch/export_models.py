#!/usr/bin/python3
"""Writes the models the libtorch side-by-side benchmark (tracemod_bench_torch) times.

For each model, OUT/<name>/ gets:
  model.pt          the eval-mode network traced with torch.jit.trace (batch 1, 3x224x224)
  <key>.npy         every state_dict tensor, torchvision's names (the tracemod model loads them)
  input.npy         a batch-1 input, and output.npy, the network's output on it (sanity check)

Run with Debian's Python, which sees python3-torch:
  /usr/bin/python3 bench/torch/export_models.py OUT
ResNet-18 is tests/reference/gen_modules.py's, plain torch.nn with torchvision's module names, so
it needs no torchvision; MobileNetV2 is torchvision's own (python3-torchvision). Weights are random (seeded), batch-norm statistics included, so no layer
is an identity.
"""
import os
import sys

import numpy as np
import torch
from torch import nn

# The torchvision-named ResNet-18 and the batch-norm randomiser of the golden generator.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from gen_modules import ResNet18, randomize_bn  # noqa: E402


def randomize_batch_norm(net):
    g = torch.Generator().manual_seed(0)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            randomize_bn(m, g)


def export(name, net, out_dir):
    torch.manual_seed(0)
    randomize_batch_norm(net)
    net.eval()
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    for key, value in net.state_dict().items():
        np.save(os.path.join(d, key + ".npy"), value.numpy())
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(net, x)
        y = net(x)
    traced.save(os.path.join(d, "model.pt"))
    np.save(os.path.join(d, "input.npy"), x.numpy())
    np.save(os.path.join(d, "output.npy"), y.numpy())
    print(f"wrote {d}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_models.py OUT_DIR")
    torch.manual_seed(0)
    export("resnet18", ResNet18(num_classes=1000, width=64), sys.argv[1])
    import torchvision  # only MobileNetV2 needs it
    export("mobilenet_v2", torchvision.models.mobilenet_v2(), sys.argv[1])


if __name__ == "__main__":
    main()
