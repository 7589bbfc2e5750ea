#!/usr/bin/python3
"""Writes tests/data/dynamic_shapes/: the eval-mode outputs of the ResNet-18 of tests/data/resnet18/
and the MobileNetV2 of tests/data/mobilenet_v2/ (their stored weights) at several batch sizes and
image sizes, for the tests of graphs traced with dynamic dimensions.

  <model>_b<batch>_<size>.npy   output for an input of shape (batch, 3, size, size)
  <model>_torch_dynamic.onnx    the net exported by torch.onnx (opset 13) with
                                dynamic_axes {input: {0: batch, 2: height, 3: width}}

The inputs are not stored: element i (row-major) is float32(sin(0.01 * i)), computed in float64,
which tests/graph/dynamic_goldens.hpp computes the same way. Outputs are computed in float64 and
rounded once. Run after gen_modules.py and gen_mobilenet_v2.py (it reads their folders and rewrites
only its own); deterministic.
"""

import shutil

import numpy as np
import torch
import torchvision

from gen_modules import DATA, RESNET, ResNet18, in_float64, save

OUT = DATA / "dynamic_shapes"
SHAPES = ((1, 224), (3, 160), (8, 224))


def stored_state(folder):
    state = {}
    for path in sorted(folder.glob("*.npy")):
        if path.stem not in ("input", "output"):
            state[path.stem] = torch.from_numpy(np.load(path))
    return state


def sine_input(batch, size):
    n = batch * 3 * size * size
    return torch.sin(torch.arange(n, dtype=torch.float64) * 0.01).float().reshape(batch, 3, size, size)


def export_onnx(name, net):
    """torch.onnx's export with the batch and image axes dynamic (dim_params batch, height, width)."""
    net.eval()
    torch.onnx.export(net, sine_input(1, 32), OUT / f"{name}_torch_dynamic.onnx", opset_version=13,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}})


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    resnet = ResNet18(num_classes=10, width=8)
    resnet.load_state_dict(stored_state(RESNET))
    mobilenet = torchvision.models.mobilenet_v2(width_mult=0.25, round_nearest=4, num_classes=10)
    mobilenet.load_state_dict(stored_state(DATA / "mobilenet_v2"))
    for name, net in (("resnet18", resnet), ("mobilenet_v2", mobilenet)):
        export_onnx(name, net)
        for batch, size in SHAPES:
            out, _ = in_float64(net, False, sine_input(batch, size))
            save(OUT / f"{name}_b{batch}_{size}.npy", out)


if __name__ == "__main__":
    main()
