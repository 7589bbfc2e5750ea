#!/usr/bin/python3
"""Exports the model zoo that `cmake/tracemod.sh zoo` checks: torchvision's classification families
and a 4-layer torch.nn.TransformerEncoder, each as an ONNX file with one input and PyTorch's output
for it.

    /usr/bin/python3 tests/reference/zoo_export.py OUT_DIR [model ...]

For each model, OUT_DIR/<model>/ gets model.onnx (torch.onnx.export, opset 13, or 14 where 13 lacks
an op the model needs), input_<i>.npy for each input, output.npy and opset.txt. Random weights from
seed 0; BatchNorm statistics are taken from data (a forward pass in training mode over eight random
images, cumulative averages), so activations keep their scale through deep nets. Batch 1 at each
family's default resolution (299 for inception_v3, 224 for the others). The transformer encoder
takes (1, 128, 256) inputs and a key padding mask whose last 32 positions are padded.

Needs Debian's python3-torch and python3-torchvision (torch 1.13, torchvision 0.14).
"""

import pathlib
import sys

import numpy as np
import torch
import torchvision

CLASSIFIERS = ["alexnet", "vgg11", "squeezenet1_1", "googlenet", "inception_v3", "densenet121", "resnet50",
               "resnext50_32x4d", "wide_resnet50_2", "mobilenet_v3_large", "shufflenet_v2_x1_0", "mnasnet1_0",
               "efficientnet_b0", "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t"]
MODELS = CLASSIFIERS + ["transformer_encoder"]


class Encoder(torch.nn.Module):
    """A 4-layer TransformerEncoder (d=256, 8 heads), batch first, with a key padding mask."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)

    def forward(self, x, padding_mask):
        return self.encoder(x, src_key_padding_mask=padding_mask)


def classifier(name):
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    net = getattr(torchvision.models, name)(**kwargs)
    for m in net.modules():  # ViT starts its head at zero: every output would be 0
        if isinstance(m, torch.nn.Linear) and not m.weight.any():
            torch.nn.init.normal_(m.weight, std=0.02)
    size = 299 if name == "inception_v3" else 224
    batch_norms = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if batch_norms:
        for m in batch_norms:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration pass
        net.train()
        with torch.no_grad():
            net(torch.randn(8, 3, size, size))
    net.eval()
    return net, (torch.randn(1, 3, size, size),)


def encoder():
    net = Encoder().eval()
    x = torch.randn(1, 128, 256)
    mask = torch.zeros(1, 128, dtype=torch.bool)
    mask[:, 96:] = True
    return net, (x, mask)


def export(name, out):
    torch.manual_seed(0)
    net, inputs = encoder() if name == "transformer_encoder" else classifier(name)
    with torch.no_grad():
        expected = net(*inputs)
    out.mkdir(parents=True, exist_ok=True)
    names = [f"input_{i}" for i in range(len(inputs))]
    for opset in (13, 14):
        try:
            torch.onnx.export(net, inputs, str(out / "model.onnx"), opset_version=opset, input_names=names,
                              output_names=["output"], do_constant_folding=True)
            break
        except Exception as error:  # an op this opset cannot express: the next one
            if opset == 14:
                raise
            print(f"{name}: opset {opset} failed ({type(error).__name__}), trying {opset + 1}", file=sys.stderr)
    for n, x in zip(names, inputs):
        np.save(out / f"{n}.npy", x.numpy())
    np.save(out / "output.npy", expected.numpy())
    (out / "opset.txt").write_text(f"{opset}\n")


def main():
    out = pathlib.Path(sys.argv[1])
    names = sys.argv[2:] or MODELS
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown model {name}; one of: {' '.join(MODELS)}")
        if (out / name / "output.npy").exists():
            continue
        print(f"exporting {name}", file=sys.stderr)
        export(name, out / name)


if __name__ == "__main__":
    main()
