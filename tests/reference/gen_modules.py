#!/usr/bin/python3
"""Writes the module goldens of tests/data/modules/ and tests/data/resnet18/ from PyTorch
(see the "Module goldens" section of README.md beside this script).

tests/data/modules/<case>.<part>.npy, one case per builtin-module configuration:
  in0, in1        the inputs
  out             the output
  <state key>     the module's state_dict before the call ("weight", "bn.running_mean", "0.bias")
  after.<key>     the state after a training-mode call (BatchNorm2d running statistics)
tests/data/resnet18/: a ResNet-18 with torchvision's names and widths 8/16/32/64, 10 classes:
  <state key>.npy for every state_dict entry, input.npy (2, 3, 48, 48) and output.npy (eval mode).

Each case draws from a generator seeded by its name, so adding a case leaves the others unchanged.
Parameters are rounded to float32 first; references are then computed in float64 and rounded once.
num_batches_tracked is stored as int32 (tracemod's integer dtype).
"""

import copy
import pathlib
import shutil
import zlib

import numpy as np
import torch
from torch import nn

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
MODULES = DATA / "modules"
RESNET = DATA / "resnet18"


def save(path, t):
    a = t.detach().numpy()
    a = a.astype(np.int32) if a.dtype.kind in "iu" else a.astype(np.float32)
    np.save(path, a)


def seeded(name):
    """Seeds torch's global generator (used by module constructors) and returns a case generator."""
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def randn(gen, *shape, scale=1.0):
    return torch.randn(shape, generator=gen, dtype=torch.float32) * scale


def uniform(gen, *shape, low, high):
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (high - low) + low


def randomize_bn(bn, gen, batches=7):
    """Non-trivial affine parameters and running statistics."""
    c = bn.num_features
    with torch.no_grad():
        if bn.affine:
            bn.weight.copy_(uniform(gen, c, low=0.5, high=1.5))
            bn.bias.copy_(randn(gen, c, scale=0.2))
        if bn.track_running_stats:
            bn.running_mean.copy_(randn(gen, c, scale=0.2))
            bn.running_var.copy_(uniform(gen, c, low=0.5, high=1.5))
            bn.num_batches_tracked.fill_(batches)


def in_float64(module, training, *inputs):
    """Runs a float64 copy of `module` (whose float32 values are the stored ones) on float64 inputs;
    returns the float32-rounded output and the copy (for its updated state)."""
    m = copy.deepcopy(module).double()
    m.train(training)
    with torch.no_grad():
        out = m(*(x.double() for x in inputs))
    return out.float(), m


def write_case(name, module, inputs, training=False):
    for i, x in enumerate(inputs):
        save(MODULES / f"{name}.in{i}.npy", x)
    for key, value in module.state_dict().items():
        save(MODULES / f"{name}.{key}.npy", value)
    out, after = in_float64(module, training, *inputs)
    save(MODULES / f"{name}.out.npy", out)
    if training:
        for key, value in after.state_dict().items():
            save(MODULES / f"{name}.after.{key}.npy", value)


class Fn(nn.Module):
    """A stateless module over a function (reference for Elemwise modes)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class ConvBn(nn.Module):
    """MegEngine's ConvBn2d / ConvBnRelu2d: members conv and bn."""

    def __init__(self, cin, cout, k, relu, **conv_args):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, **conv_args)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = relu

    def forward(self, x):
        y = self.bn(self.conv(x))
        return torch.relu(y) if self.relu else y


def linear_cases():
    g = seeded("linear_bias")
    write_case("linear_bias", nn.Linear(5, 3), [randn(g, 2, 4, 5)])
    g = seeded("linear_nobias")
    write_case("linear_nobias", nn.Linear(5, 3, bias=False), [randn(g, 7, 5)])


def conv_cases():
    g = seeded("conv2d_k3_p1")
    write_case("conv2d_k3_p1", nn.Conv2d(3, 4, 3, padding=1), [randn(g, 2, 3, 9, 7)])
    name = "conv2d_k3x2_s2_p1x2_d2_g2_nobias"
    g = seeded(name)
    conv = nn.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 2), dilation=2, groups=2, bias=False)
    write_case(name, conv, [randn(g, 1, 4, 11, 10)])


def batch_norm_cases():
    def case(name, training, **kwargs):
        g = seeded(name)
        bn = nn.BatchNorm2d(5, **kwargs)
        randomize_bn(bn, g)
        write_case(name, bn, [randn(g, 2, 5, 4, 3, scale=2.0) + 0.5], training=training)

    case("batchnorm2d_eval", False)
    case("batchnorm2d_train", True)
    case("batchnorm2d_train_momentum_none", True, momentum=None)
    case("batchnorm2d_train_eps_momentum", True, eps=1e-3, momentum=0.3)
    case("batchnorm2d_plain_eval", False, affine=False, track_running_stats=False)


def pooling_cases():
    def case(name, module, shape):
        g = seeded(name)
        write_case(name, module, [randn(g, *shape)])

    case("maxpool2d_k3_s2_p1", nn.MaxPool2d(3, 2, 1), (2, 3, 9, 8))
    case("maxpool2d_k2_ceil", nn.MaxPool2d(2, ceil_mode=True), (1, 2, 5, 7))
    case("maxpool2d_k3_s1_p1_d2", nn.MaxPool2d(3, stride=1, padding=1, dilation=2), (1, 2, 7, 6))
    case("avgpool2d_k3_s2_p1", nn.AvgPool2d(3, 2, 1), (2, 3, 9, 8))
    case("avgpool2d_k3_s2_p1_exclude_pad", nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 9, 8))
    case("avgpool2d_k2_ceil", nn.AvgPool2d(2, ceil_mode=True), (1, 2, 5, 7))
    case("adaptiveavgpool2d_1", nn.AdaptiveAvgPool2d(1), (2, 3, 7, 5))
    case("adaptiveavgpool2d_3x2", nn.AdaptiveAvgPool2d((3, 2)), (1, 2, 7, 5))
    case("flatten_default", nn.Flatten(), (2, 3, 4, 5))
    case("flatten_1_2", nn.Flatten(1, 2), (2, 3, 4, 5))


UNARY = {"RELU", "SIGMOID", "TANH", "EXP", "NEGATE"}
ELEMWISE = {
    "RELU": torch.relu,
    "SIGMOID": torch.sigmoid,
    "TANH": torch.tanh,
    "EXP": torch.exp,
    "NEGATE": torch.neg,
    "ADD": torch.add,
    "SUB": torch.sub,
    "MUL": torch.mul,
    "TRUE_DIV": torch.div,
    "MIN": torch.minimum,
    "MAX": torch.maximum,
    "FUSE_ADD_RELU": lambda x, y: torch.relu(x + y),
    "FUSE_ADD_SIGMOID": lambda x, y: torch.sigmoid(x + y),
    "FUSE_ADD_TANH": lambda x, y: torch.tanh(x + y),
}


def elemwise_cases():
    for mode, fn in ELEMWISE.items():
        name = f"elemwise_{mode.lower()}"
        g = seeded(name)
        x = randn(g, 3, 4)
        if mode not in UNARY:
            sign = torch.where(torch.rand(4, generator=g) < 0.5, -1.0, 1.0)
            y = sign * uniform(g, 4, low=0.5, high=2.0)  # a safe divisor, broadcast over rows
            write_case(name, Fn(fn), [x, y])
        else:
            write_case(name, Fn(fn), [x])


def fused_cases():
    for relu in (False, True):
        for training in (False, True):
            name = f"{'convbnrelu2d' if relu else 'convbn2d'}_{'train' if training else 'eval'}"
            g = seeded(name)
            m = ConvBn(3, 4, 3, relu, stride=2, padding=1)
            randomize_bn(m.bn, g)
            write_case(name, m, [randn(g, 2, 3, 9, 8)], training=training)


def sequential_cases():
    name = "sequential_conv_bn_relu_pool_flatten_linear"
    g = seeded(name)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(4 * 4 * 4, 5))
    randomize_bn(seq[1], g)
    write_case(name, seq, [randn(g, 2, 3, 8, 8)])


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock (same members, same order)."""

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18 with a configurable base width (torchvision's is 64)."""

    def __init__(self, num_classes, width):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._stage(width, width, 1)
        self.layer2 = self._stage(width, 2 * width, 2)
        self.layer3 = self._stage(2 * width, 4 * width, 2)
        self.layer4 = self._stage(4 * width, 8 * width, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * width, num_classes)

    @staticmethod
    def _stage(inplanes, planes, stride):
        downsample = None
        if stride != 1 or inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        return nn.Sequential(BasicBlock(inplanes, planes, stride, downsample), BasicBlock(planes, planes))

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def calibrate(net, g, calibration_shape):
    """Sets every batch norm's running statistics from one random batch (so activations stay
    normalised through a deep network), then gives it random affine parameters."""
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    net.train()
    with torch.no_grad():
        net(randn(g, *calibration_shape))
    for bn in bns:
        bn.momentum = 0.1
        with torch.no_grad():
            bn.weight.copy_(uniform(g, bn.num_features, low=0.5, high=1.5))
            bn.bias.copy_(randn(g, bn.num_features, scale=0.2))


def write_network(folder, net, x):
    """Every state_dict entry, the input and the float64 eval-mode output."""
    for key, value in net.state_dict().items():
        save(folder / f"{key}.npy", value)
    save(folder / "input.npy", x)
    out, _ = in_float64(net, False, x)
    save(folder / "output.npy", out)


def resnet18():
    g = seeded("resnet18")
    net = ResNet18(num_classes=10, width=8)
    calibrate(net, g, (8, 3, 48, 48))
    write_network(RESNET, net, randn(g, 2, 3, 48, 48))


def main():
    for folder in (MODULES, RESNET):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    for section in (linear_cases, conv_cases, batch_norm_cases, pooling_cases, elemwise_cases, fused_cases,
                    sequential_cases, resnet18):
        section()


if __name__ == "__main__":
    main()
