#!/usr/bin/python3
"""Writes the ResNet-18 of tests/data/resnet18/ (torchvision's topology and names, widths 8/16/32/64,
10 classes, random weights from gen_modules.py) as an ONNX model made by torch.onnx.export.

    /usr/bin/python3 tests/reference/gen_onnx_resnet18.py OUT.onnx

The weights are read from tests/data/resnet18/*.npy, so the model's expected output is the committed
tests/data/resnet18/output.npy for input.npy: the .onnx itself (1.2 MB) is not committed; the test
build runs this script when Debian's python3-torch is installed. Opset 13, a dynamic batch axis,
input "input" and output "output", as torchvision's export recipe writes them.
"""

import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gen_modules import RESNET, ResNet18  # noqa: E402


def main():
    out = pathlib.Path(sys.argv[1])
    net = ResNet18(num_classes=10, width=8)
    state = {key: torch.from_numpy(np.load(RESNET / f"{key}.npy")) for key in net.state_dict()}
    state = {k: v.long() if k.endswith("num_batches_tracked") else v for k, v in state.items()}
    net.load_state_dict(state)
    net.eval()
    x = torch.from_numpy(np.load(RESNET / "input.npy"))
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(net, (x,), str(out), opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


if __name__ == "__main__":
    main()
