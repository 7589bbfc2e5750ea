#!/usr/bin/python3
"""Writes the models the libtorch side-by-side benchmark (tracemod_bench_torch) times.

For each model, OUT/<name>/ gets:
  model.pt          the eval-mode network traced with torch.jit.trace (batch 1, 3x224x224)
  <key>.npy         every state_dict tensor, torchvision's names (the tracemod model loads them)
  input.npy         a batch-1 input, and output.npy, the network's output on it (sanity check)

Run with Debian's Python, which sees python3-torch:
  /usr/bin/python3 bench/torch/export_models.py OUT
ResNet-18 is written here in plain torch.nn with torchvision's module names, so torchvision is not
needed. Weights are random (seeded), batch-norm statistics included, so no layer is an identity.
"""
import os
import sys

import numpy as np
import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [width, 2 * width, 4 * width, 8 * width]
        inplanes = width
        for i, planes in enumerate(widths):
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}",
                    nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes, 1)))
            inplanes = planes
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * width, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def randomize_batch_norm(net):
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)


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
    export("resnet18", ResNet18(), sys.argv[1])


if __name__ == "__main__":
    main()
