#!/usr/bin/python3
"""Writes the golden files of tests/data/ from PyTorch (see README.md beside this script).

For each case `<op>/<case>` it writes the inputs `<case>.in0.npy`, `<case>.in1.npy`, ..., the
expected output `<case>.out.npy` (batch_norm in training mode also `<case>.running_mean.npy` and
`<case>.running_var.npy`), and one manifest line `<op>/<case> key=value ...` listing the
non-tensor arguments passed to the op, under tracemod's argument names. Arguments left at their
default are not listed.

Inputs are float32, drawn from a generator seeded by the case name (so adding a case leaves the
others unchanged). References are computed in float64 from those float32 inputs and rounded
once to float32, so they carry no float32 accumulation error of their own.

It also writes tests/data/npy/: small arrays saved by numpy itself, read by tests/io/npy.cpp.
And tests/data/vit/ and tests/data/convnext/: reduced torchvision ViT and ConvNeXt networks (zoo_models).
"""

import copy
import math
import pathlib
import shutil
import zlib

import numpy as np
import torch
import torch.nn.functional as F

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def dims(shape):
    """(2, 3, 4) -> '2x3x4'; () -> 'scalar'."""
    return "x".join(map(str, shape)) if shape else "scalar"


def manifest_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return ",".join(manifest_value(x) for x in v)
    return repr(v)


class Case:
    """One golden case: its seeded generator and the tensors it writes."""

    def __init__(self, op, name):
        self.key = f"{op}/{name}"
        self.gen = torch.Generator().manual_seed(zlib.crc32(self.key.encode()))

    def randn(self, *shape, scale=1.0):
        return torch.randn(shape, generator=self.gen, dtype=torch.float32) * scale

    def uniform(self, *shape, low, high):
        return torch.rand(shape, generator=self.gen, dtype=torch.float32) * (high - low) + low

    def away_from_zero(self, *shape):
        """Values in [-2, -0.5] U [0.5, 2]: safe divisors."""
        sign = torch.where(torch.rand(shape, generator=self.gen) < 0.5, -1.0, 1.0)
        return sign * self.uniform(*shape, low=0.5, high=2.0)


class Writer:
    def __init__(self, root):
        self.root = root
        self.lines = []

    def write(self, case, inputs, outputs, params=None):
        """inputs: list of float32 tensors; outputs: dict suffix -> float64 tensor."""
        op, name = case.key.split("/")
        folder = self.root / op
        folder.mkdir(parents=True, exist_ok=True)
        for i, t in enumerate(inputs):
            save(folder / f"{name}.in{i}.npy", t)
        for suffix, t in outputs.items():
            save(folder / f"{name}.{suffix}.npy", t)
        args = " ".join(f"{k}={manifest_value(v)}" for k, v in (params or {}).items())
        self.lines.append(f"{case.key} {args}".rstrip())

    def finish(self):
        (self.root / "manifest.txt").write_text("\n".join(self.lines) + "\n")


def save(path, t):
    # C order always: np.save would write a transposed view as fortran_order True.
    np.save(path, np.ascontiguousarray(t.detach().to(torch.float32).numpy()))


def f64(*tensors):
    return [t.to(torch.float64) for t in tensors]


# --- elementwise -------------------------------------------------------------------------------

BINARY_SHAPES = [
    ((7, 13), (7, 13)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 1)),
    ((2, 8, 5, 5), (8, 1, 1)),
    ((1, 17), (13, 1)),
    ((37,), (1,)),
    ((), (5,)),
    ((0, 4), (4,)),
]
BINARY_OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "minimum": torch.minimum,
    "maximum": torch.maximum,
}
UNARY_OPS = {
    "neg": (torch.neg, (-10.0, 10.0)),
    "relu": (torch.relu, (-10.0, 10.0)),
    "relu6": (F.relu6, (-3.0, 9.0)),
    "exp": (torch.exp, (-10.0, 10.0)),
    "sigmoid": (torch.sigmoid, (-10.0, 10.0)),
    "tanh": (torch.tanh, (-10.0, 10.0)),
    "gelu": (F.gelu, (-6.0, 6.0)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), (-6.0, 6.0)),  # F::gelu(x, {.approximate = "tanh"})
    "silu": (F.silu, (-10.0, 10.0)),
    "hardswish": (F.hardswish, (-5.0, 5.0)),
    "hardsigmoid": (F.hardsigmoid, (-5.0, 5.0)),
    "leaky_relu": (F.leaky_relu, (-10.0, 10.0)),  # the default slope 0.01
}
UNARY_SHAPES = [(7, 13), (2, 3, 17), (37,), (), (0, 5)]


def elementwise(w):
    for op, fn in BINARY_OPS.items():
        for sa, sb in BINARY_SHAPES:
            c = Case(op, f"{dims(sa)}_{dims(sb)}")
            a = c.randn(*sa, scale=3.0)
            b = c.away_from_zero(*sb) if op == "div" else c.randn(*sb, scale=3.0)
            w.write(c, [a, b], {"out": fn(*f64(a, b))})
    for op, (fn, (low, high)) in UNARY_OPS.items():
        for shape in UNARY_SHAPES:
            c = Case(op, dims(shape))
            x = c.uniform(*shape, low=low, high=high)
            w.write(c, [x], {"out": fn(*f64(x))})
        c = Case(op, "linspace_101")  # evenly covers the range, both ends included
        x = torch.linspace(low, high, 101, dtype=torch.float32)
        w.write(c, [x], {"out": fn(*f64(x))})


# --- matmul, linear ----------------------------------------------------------------------------

def matmul(w):
    plain = [
        ((7, 13), (13, 17)),
        ((16, 16), (16, 16)),
        ((33, 17), (17, 65)),
        ((1, 37), (37, 1)),
        ((5, 0), (0, 3)),
        ((0, 4), (4, 3)),
        ((2, 7, 13), (2, 13, 5)),
        ((3, 1, 17), (3, 17, 1)),
        ((13,), (13, 17)),
        ((7, 13), (13,)),
    ]
    for sa, sb in plain:
        c = Case("matmul", f"{dims(sa)}_{dims(sb)}")
        a, b = c.randn(*sa), c.randn(*sb)
        w.write(c, [a, b], {"out": torch.matmul(*f64(a, b))})
    # Shapes as stored; the op transposes the last two axes of the flagged operands.
    transposed = [
        ("ta", (13, 7), (13, 5), True, False),
        ("tb", (7, 13), (5, 13), False, True),
        ("ta_tb", (13, 7), (5, 13), True, True),
        ("ta_tb", (2, 17, 3), (2, 9, 17), True, True),
        ("tb", (2, 7, 13), (2, 5, 13), False, True),
    ]
    for prefix, sa, sb, ta, tb in transposed:
        c = Case("matmul", f"{prefix}_{dims(sa)}_{dims(sb)}")
        a, b = c.randn(*sa), c.randn(*sb)
        a64, b64 = f64(a, b)
        out = torch.matmul(a64.transpose(-1, -2) if ta else a64, b64.transpose(-1, -2) if tb else b64)
        params = {}
        if ta:
            params["transpose_a"] = True
        if tb:
            params["transpose_b"] = True
        w.write(c, [a, b], {"out": out}, params)


def linear(w):
    cases = [((7, 13), 17), ((2, 5, 13), 17), ((1, 1), 1), ((33, 65), 20), ((0, 6), 4)]
    for shape, out_features in cases:
        for bias in (True, False):
            c = Case("linear", f"{dims(shape)}_out{out_features}_{'bias' if bias else 'nobias'}")
            x = c.randn(*shape)
            weight = c.randn(out_features, shape[-1], scale=0.3)
            inputs = [x, weight] + ([c.randn(out_features)] if bias else [])
            w.write(c, inputs, {"out": F.linear(*f64(*inputs))})


# --- conv2d ------------------------------------------------------------------------------------

def conv2d(w):
    # (name, input shape, weight shape, bias, keyword arguments)
    cases = [
        ("k3_s1_p0", (2, 3, 7, 7), (4, 3, 3, 3), True, {}),
        ("k3_s2_p1", (2, 3, 13, 13), (8, 3, 3, 3), True, {"stride": 2, "padding": 1}),
        ("k3_s2_p0", (2, 3, 8, 8), (5, 3, 3, 3), True, {"stride": 2}),
        ("k3_s1_p1x2", (1, 3, 7, 9), (5, 3, 3, 3), True, {"padding": (1, 2)}),
        ("k3_s1_p2_d2", (1, 2, 13, 13), (3, 2, 3, 3), True, {"padding": 2, "dilation": 2}),
        ("k3_s1_p1_g2", (2, 4, 9, 9), (6, 2, 3, 3), True, {"padding": 1, "groups": 2}),
        ("k3_s2_p1_g2", (2, 6, 11, 11), (4, 3, 3, 3), True, {"stride": 2, "padding": 1, "groups": 2}),
        ("k3_s3_p1_d2_g2", (1, 4, 17, 13), (6, 2, 3, 3), True, {"stride": 3, "padding": 1, "dilation": 2, "groups": 2}),
        ("dw_k3_s1_p1", (2, 8, 7, 7), (8, 1, 3, 3), True, {"padding": 1, "groups": 8}),
        ("dw_k3_s2_p1", (2, 17, 13, 13), (17, 1, 3, 3), True, {"stride": 2, "padding": 1, "groups": 17}),
        ("dw_m2_k3_s1_p1", (1, 4, 7, 7), (8, 1, 3, 3), True, {"padding": 1, "groups": 4}),
        ("k3_s1_p1_nobias", (2, 5, 7, 7), (7, 5, 3, 3), False, {"padding": 1}),
        ("k1_s1_p0", (2, 17, 5, 5), (13, 17, 1, 1), True, {}),
        ("k1_s2_p0_nobias", (1, 8, 7, 7), (16, 8, 1, 1), False, {"stride": 2}),
        ("k3x5_s1_p1x2", (2, 3, 9, 11), (4, 3, 3, 5), True, {"padding": (1, 2)}),
        ("k1x7_s2x1_p0x3", (1, 4, 7, 13), (6, 4, 1, 7), True, {"stride": (2, 1), "padding": (0, 3)}),
        ("k5_s1_p2_c19_o33", (1, 19, 6, 6), (33, 19, 5, 5), True, {"padding": 2}),
        ("k7_s2_p3", (1, 3, 17, 17), (8, 3, 7, 7), True, {"stride": 2, "padding": 3}),
        ("k3_s1_p0_n0", (0, 3, 5, 5), (4, 3, 3, 3), True, {}),
    ]
    for name, xs, ws, bias, kwargs in cases:
        c = Case("conv2d", name)
        x = c.randn(*xs)
        weight = c.randn(*ws, scale=0.3)
        inputs = [x, weight] + ([c.randn(ws[0])] if bias else [])
        out = F.conv2d(*f64(*inputs), **kwargs) if bias else F.conv2d(*f64(*inputs), None, **kwargs)
        w.write(c, inputs, {"out": out}, kwargs)


# --- batch_norm --------------------------------------------------------------------------------

def batch_norm(w):
    # (name, input shape, affine, keyword arguments)
    cases = [
        ("eval_affine_2x3x5x5", (2, 3, 5, 5), True, {"training": False}),
        ("eval_affine_2x17x7x7", (2, 17, 7, 7), True, {"training": False}),
        ("eval_noaffine_2x3x5x5", (2, 3, 5, 5), False, {"training": False}),
        ("eval_affine_eps1e-3_2x3x5x5", (2, 3, 5, 5), True, {"training": False, "eps": 1e-3}),
        ("eval_affine_7x13", (7, 13), True, {"training": False}),
        ("train_affine_4x3x5x5", (4, 3, 5, 5), True, {"training": True, "momentum": 0.1}),
        ("train_affine_2x17x7x7", (2, 17, 7, 7), True, {"training": True, "momentum": 0.1}),
        ("train_noaffine_2x5x3x3", (2, 5, 3, 3), False, {"training": True, "momentum": 0.1}),
        ("train_affine_m0p3_2x3x7x7", (2, 3, 7, 7), True, {"training": True, "momentum": 0.3}),
        ("train_affine_8x13", (8, 13), True, {"training": True, "momentum": 0.1}),
    ]
    for name, xs, affine, kwargs in cases:
        c = Case("batch_norm", name)
        channels = xs[1]
        x = c.randn(*xs, scale=2.0) + 0.5
        running_mean = c.randn(channels, scale=0.5)
        running_var = c.uniform(channels, low=0.5, high=2.0)
        inputs = [x, running_mean, running_var]
        if affine:
            inputs += [c.uniform(channels, low=0.5, high=1.5), c.randn(channels, scale=0.5)]
        x64, mean64, var64, *affine64 = f64(*inputs)
        # F.batch_norm updates the running statistics in place (PyTorch's convention:
        # running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance).
        out = F.batch_norm(x64, mean64, var64, *affine64, **kwargs)
        outputs = {"out": out}
        if kwargs["training"]:
            outputs |= {"running_mean": mean64, "running_var": var64}
        w.write(c, inputs, outputs, kwargs)


# --- pooling -----------------------------------------------------------------------------------

def pooling(w):
    max_cases = [
        ("k2", (2, 3, 8, 8), {"kernel_size": 2}),
        ("k2_7x7", (1, 2, 7, 7), {"kernel_size": 2}),
        ("k3_s2", (1, 4, 13, 13), {"kernel_size": 3, "stride": 2}),
        ("k3_s2_p1", (2, 3, 13, 13), {"kernel_size": 3, "stride": 2, "padding": 1}),
        ("k3_s2_p1_negative", (1, 3, 9, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
        ("k2_ceil", (1, 3, 7, 7), {"kernel_size": 2, "ceil_mode": True}),
        ("k3_s2_p1_ceil", (1, 2, 8, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
        ("k3_s1_d2", (1, 3, 9, 9), {"kernel_size": 3, "stride": 1, "dilation": 2}),
        ("k3_s2_p1_d2", (2, 2, 11, 11), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}),
        ("k2x3_s2x1", (1, 2, 7, 9), {"kernel_size": (2, 3), "stride": (2, 1)}),
        ("k3_s2_c17", (2, 17, 9, 9), {"kernel_size": 3, "stride": 2}),
        ("k2_n0", (0, 3, 4, 4), {"kernel_size": 2}),
    ]
    for name, xs, kwargs in max_cases:
        c = Case("max_pool2d", name)
        x = c.randn(*xs)
        if name.endswith("negative"):  # padding must act as -inf, not 0
            x = -x.abs() - 1.0
        w.write(c, [x], {"out": F.max_pool2d(*f64(x), **kwargs)}, kwargs)

    avg_cases = [
        ("k2", (2, 3, 8, 8), {"kernel_size": 2}),
        ("k3_s2", (1, 4, 13, 13), {"kernel_size": 3, "stride": 2}),
        ("k3_s2_p1_incl", (2, 3, 13, 13), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": True}),
        ("k3_s2_p1_excl", (2, 3, 13, 13), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
        ("k3_s2_ceil", (1, 2, 8, 8), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
        ("k3_s2_p1_ceil_incl", (1, 2, 8, 8),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": True}),
        ("k3_s2_p1_ceil_excl", (1, 2, 8, 8),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
        ("k2x3_s1_p1_excl", (1, 3, 7, 9), {"kernel_size": (2, 3), "stride": 1, "padding": 1, "count_include_pad": False}),
        ("k3_s1_p1", (2, 17, 7, 7), {"kernel_size": 3, "stride": 1, "padding": 1}),
    ]
    for name, xs, kwargs in avg_cases:
        c = Case("avg_pool2d", name)
        x = c.randn(*xs)
        w.write(c, [x], {"out": F.avg_pool2d(*f64(x), **kwargs)}, kwargs)

    adaptive_cases = [
        ("7to1", (2, 3, 7, 7), 1),
        ("7to3", (1, 4, 7, 7), 3),
        ("10to4", (1, 2, 10, 10), 4),
        ("6to3", (2, 3, 6, 6), 3),
        ("13x9to4x5", (1, 3, 13, 9), (4, 5)),
        ("5to7", (1, 2, 5, 5), 7),
        ("7x7to1x1_c17", (2, 17, 7, 7), (1, 1)),
    ]
    for name, xs, output_size in adaptive_cases:
        c = Case("adaptive_avg_pool2d", name)
        x = c.randn(*xs)
        w.write(c, [x], {"out": F.adaptive_avg_pool2d(*f64(x), output_size)}, {"output_size": output_size})


# --- softmax and shape ops ---------------------------------------------------------------------

def softmax(w):
    # (name, shape, axis, value range or None for randn*3)
    cases = [
        ("7x13_axis0", (7, 13), 0, None),
        ("7x13_axis1", (7, 13), 1, None),
        ("7x13_axis-1", (7, 13), -1, None),
        ("2x3x17_axis1", (2, 3, 17), 1, None),
        ("2x3x4x5_axis-1", (2, 3, 4, 5), -1, None),
        ("2x3x4x5_axis0", (2, 3, 4, 5), 0, None),
        ("37_axis0", (37,), 0, None),
        ("large_5x33_axis-1", (5, 33), -1, (-1000.0, 1000.0)),
        ("large_4x17_axis1", (4, 17), 1, (990.0, 1010.0)),
        ("0x5_axis-1", (0, 5), -1, None),
    ]
    for name, shape, axis, span in cases:
        c = Case("softmax", name)
        x = c.uniform(*shape, low=span[0], high=span[1]) if span else c.randn(*shape, scale=3.0)
        w.write(c, [x], {"out": torch.softmax(*f64(x), axis)}, {"axis": axis})


def shape_ops(w):
    flatten_cases = [
        ("2x3x4x5", (2, 3, 4, 5), {}),
        ("2x3x4x5_s1", (2, 3, 4, 5), {"start_axis": 1}),
        ("2x3x4x5_s1_e2", (2, 3, 4, 5), {"start_axis": 1, "end_axis": 2}),
        ("2x3x4x5_s-2", (2, 3, 4, 5), {"start_axis": -2}),
        ("2x3x4x5_s0_e-2", (2, 3, 4, 5), {"start_axis": 0, "end_axis": -2}),
        ("2x3x4x5_s2_e2", (2, 3, 4, 5), {"start_axis": 2, "end_axis": 2}),
        ("7", (7,), {}),
        ("0x3x4_s1", (0, 3, 4), {"start_axis": 1}),
    ]
    for name, shape, kwargs in flatten_cases:
        c = Case("flatten", name)
        x = c.randn(*shape)
        out = torch.flatten(x, kwargs.get("start_axis", 0), kwargs.get("end_axis", -1))
        w.write(c, [x], {"out": out}, kwargs)

    reshape_cases = [
        ((2, 3, 4), (6, -1)),
        ((2, 3, 4), (-1,)),
        ((2, 3, 4), (4, -1, 2)),
        ((7, 13), (1, -1, 1)),
        ((24,), (2, 3, 4)),
        ((0, 3), (-1, 3)),
    ]
    for shape, target in reshape_cases:
        c = Case("reshape", f"{dims(shape)}_to_{'x'.join(map(str, target))}")
        x = c.randn(*shape)
        w.write(c, [x], {"out": x.reshape(target)}, {"target_shape": target})

    transpose_cases = [
        ((7, 13), (1, 0)),
        ((17, 33), (1, 0)),
        ((2, 3, 17), (2, 0, 1)),
        ((2, 3, 17), (1, 0, 2)),
        ((2, 3, 4), (0, 1, 2)),
        ((2, 3, 5, 7), (0, 2, 3, 1)),
        ((2, 3, 5, 7), (0, 3, 1, 2)),
        ((2, 3, 5, 7), (3, 2, 1, 0)),
        ((0, 3, 4), (2, 0, 1)),
    ]
    for shape, pattern in transpose_cases:
        c = Case("transpose", f"{dims(shape)}_p{''.join(map(str, pattern))}")
        x = c.randn(*shape)
        w.write(c, [x], {"out": x.permute(pattern)}, {"pattern": pattern})

    concat_cases = [
        ("axis0_3in", [(2, 3), (4, 3), (1, 3)], 0),
        ("axis1_3in", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], 1),
        ("axis-1_3in", [(2, 3, 4), (2, 3, 7), (2, 3, 1)], -1),
        ("axis2_3in_rank4", [(2, 3, 5, 7), (2, 3, 1, 7), (2, 3, 4, 7)], 2),
        ("axis1_2in", [(7, 13), (7, 17)], 1),
        ("axis0_empty", [(0, 5), (3, 5), (2, 5)], 0),
    ]
    for name, shapes, axis in concat_cases:
        c = Case("concat", name)
        xs = [c.randn(*s) for s in shapes]
        w.write(c, xs, {"out": torch.cat(xs, axis)}, {"axis": axis})


def pad(w):
    # (name, shape, pad, mode, value): PyTorch's pad list, pairs from the last axis backwards
    cases = [
        ("2x3x4x5_w_constant", (2, 3, 4, 5), (1, 2), "constant", 0.0),
        ("2x3x4x5_hw_constant", (2, 3, 4, 5), (1, 1, 2, 2), "constant", 0.0),
        ("2x3x4x5_hw_constant_1.5", (2, 3, 4, 5), (2, 1, 0, 3), "constant", 1.5),
        ("2x3x4x5_chw_constant_1.5", (2, 3, 4, 5), (1, 0, 0, 1, 2, 1), "constant", 1.5),
        ("2x3x4x5_w_reflect", (2, 3, 4, 5), (2, 3), "reflect", 0.0),
        ("2x3x4x5_hw_reflect", (2, 3, 4, 5), (1, 1, 3, 2), "reflect", 0.0),
        ("2x3x4x5_hw_reflect_asym", (2, 3, 4, 5), (4, 0, 0, 3), "reflect", 0.0),
        ("2x3x7_constant_1.5", (2, 3, 7), (3, 1), "constant", 1.5),
        ("2x3x7_reflect", (2, 3, 7), (6, 2), "reflect", 0.0),
        ("2x3x7_crop", (2, 3, 7), (-2, 1, 1, -1), "constant", 0.0),
        ("2x3x4x5_hw_replicate", (2, 3, 4, 5), (2, 3, 1, 4), "replicate", 0.0),
    ]
    for name, shape, pads, mode, value in cases:
        c = Case("pad", name)
        x = c.randn(*shape)
        kwargs = {"pad": pads}
        if mode != "constant":
            kwargs["mode"] = mode
        if value != 0.0:
            kwargs["value"] = value
        if mode == "constant":
            out = F.pad(*f64(x), pads, mode=mode, value=value)
        else:  # torch pads the last two axes of a 4-D input in these modes: W alone is (l, r, 0, 0)
            full = pads + (0, 0) if x.dim() == 4 and len(pads) == 2 else pads
            out = F.pad(*f64(x), full, mode=mode)
        w.write(c, [x], {"out": out}, kwargs)


# --- interpolate -------------------------------------------------------------------------------

def interpolate(w):
    # (name, shape, size or None, scale_factor or None, mode, align_corners or None). The reference
    # runs PyTorch's float32 kernel on the float32 input: its source indices and weights are
    # computed in the input's precision, so a float64 run would pick other weights (and, for
    # nearest, possibly other pixels). Every input has C > 1: with C == 1 a contiguous tensor is also
    # channels-last, and PyTorch runs another kernel on it (one that copies kept extents).
    cases = [
        ("nearest_size_up", (1, 2, 5, 7), (8, 11), None, "nearest", None),
        ("nearest_size_down", (2, 3, 5, 7), (3, 4), None, "nearest", None),
        ("nearest_size_double", (1, 2, 5, 7), (10, 14), None, "nearest", None),
        ("nearest_size_same", (1, 2, 5, 7), (5, 7), None, "nearest", None),
        ("nearest_scale_2", (2, 2, 3, 5), None, 2.0, "nearest", None),
        ("nearest_scale_1.5", (1, 3, 5, 7), None, 1.5, "nearest", None),
        ("nearest_scale_0.5", (1, 3, 9, 7), None, 0.5, "nearest", None),
        ("nearest_scale_3", (1, 2, 4, 3), None, 3.0, "nearest", None),
        ("nearest_scale_0.3", (1, 2, 11, 13), None, 0.3, "nearest", None),
        # extents kept or doubled by a factor that is not 1 or 2: PyTorch's nearest still reads
        # floor(dst / factor) there, its bilinear copies a kept extent
        ("nearest_scale_1.2_same", (1, 2, 3, 4), None, 1.2, "nearest", None),
        ("nearest_scale_2.1_double", (1, 2, 5, 6), None, 2.1, "nearest", None),
        ("bilinear_scale_1.2_same", (1, 2, 3, 4), None, 1.2, "bilinear", None),
        ("bilinear_scale_2.1", (1, 2, 5, 6), None, 2.1, "bilinear", None),
        ("bilinear_size_up", (1, 2, 5, 7), (8, 11), None, "bilinear", None),
        ("bilinear_size_down", (2, 3, 9, 7), (4, 3), None, "bilinear", None),
        ("bilinear_size_row", (1, 2, 5, 7), (1, 3), None, "bilinear", None),
        ("bilinear_scale_2", (2, 2, 3, 5), None, 2.0, "bilinear", None),
        ("bilinear_scale_1.5", (1, 3, 5, 7), None, 1.5, "bilinear", None),
        ("bilinear_scale_0.5", (1, 3, 9, 7), None, 0.5, "bilinear", None),
        ("bilinear_scale_0.3", (1, 2, 11, 13), None, 0.3, "bilinear", None),
        ("bilinear_align_size_up", (1, 2, 5, 7), (8, 11), None, "bilinear", True),
        ("bilinear_align_size_down", (2, 3, 9, 7), (4, 3), None, "bilinear", True),
        ("bilinear_align_size_row", (1, 2, 5, 7), (1, 5), None, "bilinear", True),
        ("bilinear_align_scale_1.5", (1, 3, 5, 7), None, 1.5, "bilinear", True),
        ("bilinear_align_scale_0.5", (1, 3, 9, 7), None, 0.5, "bilinear", True),
        ("bilinear_align_false_scale_2", (1, 2, 4, 4), None, 2.0, "bilinear", False),
    ]
    for name, shape, size, scale, mode, align in cases:
        c = Case("interpolate", name)
        x = c.randn(*shape)
        kwargs = {}
        if size is not None:
            kwargs["size"] = size
        if scale is not None:
            kwargs["scale_factor"] = scale
        if mode != "nearest":
            kwargs["mode"] = mode
        if align is not None:
            kwargs["align_corners"] = align
        out = F.interpolate(x, **kwargs)
        w.write(c, [x], {"out": out}, kwargs)


# --- reductions --------------------------------------------------------------------------------

def reductions(w):
    # (name, shape, axis or None for all axes, keepdims); the same cases for sum, mean, max, min
    cases = [
        ("2x3x4x5_a1", (2, 3, 4, 5), (1,), False),
        ("2x3x4x5_a1_keep", (2, 3, 4, 5), (1,), True),
        ("2x3x4x5_a-1", (2, 3, 4, 5), (-1,), False),
        ("2x3x4x5_a-1_keep", (2, 3, 4, 5), (-1,), True),
        ("2x3x4x5_a23", (2, 3, 4, 5), (2, 3), False),
        ("2x3x4x5_a23_keep", (2, 3, 4, 5), (2, 3), True),
        ("2x3x4x5_a02", (2, 3, 4, 5), (0, 2), False),
        ("2x3x4x5_a3-4_keep", (2, 3, 4, 5), (3, -4), True),
        ("2x3x4x5_all", (2, 3, 4, 5), None, False),
        ("2x3x4x5_all_keep", (2, 3, 4, 5), None, True),
        ("7x13_a0", (7, 13), (0,), False),
        ("1x17x1_a-2_keep", (1, 17, 1), (-2,), True),
        ("2x300_a1", (2, 300), (1,), False),
    ]
    ops = {
        "sum": lambda x, dim, keep: x.sum(dim=dim, keepdim=keep) if dim else (x.sum().reshape([1] * x.dim()) if keep else x.sum()),
        "mean": lambda x, dim, keep: x.mean(dim=dim, keepdim=keep) if dim else (x.mean().reshape([1] * x.dim()) if keep else x.mean()),
        "max": lambda x, dim, keep: torch.amax(x, dim=dim if dim else tuple(range(x.dim())), keepdim=keep),
        "min": lambda x, dim, keep: torch.amin(x, dim=dim if dim else tuple(range(x.dim())), keepdim=keep),
    }
    for op, f in ops.items():
        for name, shape, axis, keep in cases:
            c = Case(op, name)
            x = c.randn(*shape, scale=3.0)
            params = {} if axis is None else {"axis": axis}
            if keep:
                params["keepdims"] = True
            out = f(*f64(x), list(axis) if axis else None, keep)
            w.write(c, [x], {"out": out}, params)
            if out.dim() == 0:  # save() writes a 0-d array as 1-d (np.ascontiguousarray); the result is a scalar
                np.save(w.root / op / f"{name}.out.npy", out.to(torch.float32).numpy())
    for op, f in (("sum", ops["sum"]), ("mean", ops["mean"])):  # an empty reduction: 0 and NaN
        for name, shape, axis in (("0x5_a0", (0, 5), (0,)), ("3x0x2_a1", (3, 0, 2), (1,))):
            c = Case(op, name)
            x = c.randn(*shape)
            w.write(c, [x], {"out": f(*f64(x), list(axis), False)}, {"axis": axis})
    c = Case("max", "0x5_a1")  # a kept empty axis: an empty result, no empty set reduced
    x = c.randn(0, 5)
    w.write(c, [x], {"out": torch.amax(x, dim=1)}, {"axis": (1,)})


# --- layer_norm and group_norm ----------------------------------------------------------------

def norms(w):
    # (name, shape, normalized_shape, affine, eps): inputs x, then weight and bias when affine
    layer = [
        ("2x3x8_d8", (2, 3, 8), (8,), True, 1e-5),
        ("2x3x8_d8_noaffine", (2, 3, 8), (8,), False, 1e-5),
        ("2x3x4x5_d4x5", (2, 3, 4, 5), (4, 5), True, 1e-5),
        ("2x3x4x5_d4x5_noaffine_eps1e-3", (2, 3, 4, 5), (4, 5), False, 1e-3),
        ("2x3x4x5_d3x4x5", (2, 3, 4, 5), (3, 4, 5), True, 1e-5),
        ("7x300_d300", (7, 300), (300,), True, 1e-5),
    ]
    for name, shape, normalized, affine, eps in layer:
        c = Case("layer_norm", name)
        x = c.randn(*shape, scale=2.0) + 0.5
        inputs = [x]
        if affine:
            inputs += [c.uniform(*normalized, low=0.5, high=1.5), c.randn(*normalized, scale=0.5)]
        params = {"normalized_shape": normalized}
        if eps != 1e-5:
            params["eps"] = eps
        out = F.layer_norm(*f64(x), normalized, *f64(*inputs[1:]), eps=eps)
        w.write(c, inputs, {"out": out}, params)
    # (name, shape, num_groups, affine)
    group = [
        ("2x6x5x5_g1", (2, 6, 5, 5), 1, True),
        ("2x6x5x5_g2", (2, 6, 5, 5), 2, True),
        ("2x6x5x5_g6", (2, 6, 5, 5), 6, True),
        ("2x6x5x5_g2_noaffine", (2, 6, 5, 5), 2, False),
        ("3x4x7_g2", (3, 4, 7), 2, True),
        ("4x8_g4", (4, 8), 4, True),
    ]
    for name, shape, groups, affine in group:
        c = Case("group_norm", name)
        x = c.randn(*shape, scale=2.0) + 0.5
        inputs = [x]
        if affine:
            inputs += [c.uniform(shape[1], low=0.5, high=1.5), c.randn(shape[1], scale=0.5)]
        out = F.group_norm(*f64(x), groups, *f64(*inputs[1:]))
        w.write(c, inputs, {"out": out}, {"num_groups": groups})


# --- quantization ------------------------------------------------------------------------------

def quantization(root):
    """tests/data/quant/: observers fed batches in0, in1, ... (their final qparams in scale.npy and
    zero_point.npy, zero points as float32), and fake quantization (in0 -> out). No manifest lines:
    tests/nn/quant_goldens.cpp knows each case's arguments."""
    from torch.ao.quantization import observer as obs
    root.mkdir(parents=True, exist_ok=True)

    def write(name, inputs, outputs):
        for i, t in enumerate(inputs):
            save(root / f"{name}.in{i}.npy", t)
        for suffix, t in outputs.items():
            save(root / f"{name}.{suffix}.npy", t)

    def observed(name, observer, batches):
        for b in batches:
            observer(b)
        scale, zero_point = observer.calculate_qparams()
        write(name, batches, {"scale": scale, "zero_point": zero_point.to(torch.float32)})

    def batches(name, *shape, n=3, scale=2.0):
        c = Case("quant", name)
        return [c.randn(*shape, scale=scale) + 0.3 * k for k in range(n)]

    observed("minmax_affine_quint8", obs.MinMaxObserver(), batches("minmax_affine_quint8", 4, 5))
    observed("minmax_symmetric_qint8", obs.MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
             batches("minmax_symmetric_qint8", 4, 5))
    observed("minmax_affine_qint8_reduce", obs.MinMaxObserver(dtype=torch.qint8, reduce_range=True),
             batches("minmax_affine_qint8_reduce", 3, 7))
    observed("minmax_symmetric_quint8", obs.MinMaxObserver(qscheme=torch.per_tensor_symmetric),
             batches("minmax_symmetric_quint8", 2, 6))
    observed("minmax_positive", obs.MinMaxObserver(), [Case("quant", "minmax_positive").uniform(3, 4, low=0.5, high=3.0)])
    observed("moving_average", obs.MovingAverageMinMaxObserver(), batches("moving_average", 4, 6))
    observed("moving_average_symmetric_qint8",
             obs.MovingAverageMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, averaging_constant=0.1),
             batches("moving_average_symmetric_qint8", 4, 6))
    observed("per_channel_symmetric_qint8",
             obs.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric),
             batches("per_channel_symmetric_qint8", 5, 3, 4))
    observed("per_channel_affine_quint8_axis1", obs.PerChannelMinMaxObserver(ch_axis=1),
             batches("per_channel_affine_quint8_axis1", 2, 4, 3))
    # One batch whose extremes are integers: PyTorch 1.13 bins over [int(min), int(max)] (tracemod over
    # [min, max]), the same range here. Outliers at both ends give the L2 search something to cut.
    c = Case("quant", "histogram")
    x = c.randn(2000, scale=0.7)
    x[:3] = torch.tensor([-3.0, 5.0, 4.0])
    observed("histogram", obs.HistogramObserver(), [x])
    c = Case("quant", "histogram_symmetric_qint8")
    x = c.randn(40, 50, scale=1.3)
    x[0, :2] = torch.tensor([-6.0, 2.0])
    observed("histogram_symmetric_qint8", obs.HistogramObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric), [x])

    # Batches re-binned onto a wider range ([-1, 2], then [-4, 2]: the union is a whole number of the
    # old histogram's sub-bins, so PyTorch's integer-truncated histc range is the true one), then one
    # inside it (added bin by bin).
    c = Case("quant", "histogram_batches")
    xs = []
    for lo, hi in ((-1.0, 2.0), (-4.0, 2.0), (-2.0, 1.0)):
        x = c.uniform(700, low=lo, high=hi)
        x[:2] = torch.tensor([lo, hi])
        xs.append(x)
    h = obs.HistogramObserver()
    observed("histogram_batches", h, xs)
    save(root / "histogram_batches.histogram.npy", h.histogram)

    for name, scale, zp, qmin, qmax in (("fake_quantize_qint8", 0.1, 3, -128, 127),
                                        ("fake_quantize_quint8", 0.023529412, 128, 0, 255),
                                        ("fake_quantize_narrow", 0.0625, 0, -127, 127)):
        c = Case("quant", name)
        x = c.randn(6, 50, scale=6.0)
        x[0] = (torch.arange(50, dtype=torch.float32) - 25) * (scale / 2)  # halfway cases: round half to even
        write(name, [x], {"out": torch.fake_quantize_per_tensor_affine(x, scale, zp, qmin, qmax)})
    c = Case("quant", "fake_quantize_per_channel")
    x = c.randn(2, 3, 4, 5, scale=3.0)
    scale = torch.tensor([0.05, 0.1, 0.02], dtype=torch.float32)
    zp = torch.tensor([0, 10, -5], dtype=torch.int32)
    out = torch.fake_quantize_per_channel_affine(x, scale, zp, 1, -128, 127)
    write("fake_quantize_per_channel", [x, scale, zp.to(torch.float32)], {"out": out})


# --- scaled_dot_product_attention --------------------------------------------------------------

def attention(w):
    # torch 1.13 has no F.scaled_dot_product_attention: its definition in float64,
    # softmax(q @ k^T * scale + mask) @ v, causal as -inf above the diagonal.
    # (name, q shape, k shape, v shape, mask shape or None, is_causal, scale or None)
    cases = [
        ("3d_l5_s7_e8_ev6", (2, 5, 8), (2, 7, 8), (2, 7, 6), None, False, None),
        ("4d_h3_l6_s6_e4", (2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 4), None, False, None),
        ("4d_mask_over_heads", (2, 3, 5, 8), (2, 3, 9, 8), (2, 3, 9, 8), (2, 1, 5, 9), False, None),
        ("3d_mask_2d", (2, 4, 8), (2, 6, 8), (2, 6, 8), (4, 6), False, None),
        ("4d_causal_l7_s9", (1, 2, 7, 8), (1, 2, 9, 8), (1, 2, 9, 5), None, True, None),
        ("3d_scale", (2, 5, 8), (2, 5, 8), (2, 5, 8), None, False, 0.3),
        ("4d_kv_broadcast", (2, 4, 6, 8), (1, 1, 7, 8), (1, 1, 7, 8), None, False, None),
        ("3d_long_300", (2, 300, 16), (2, 300, 16), (2, 300, 16), None, False, None),
        ("3d_long_300_causal", (1, 300, 16), (1, 300, 16), (1, 300, 12), None, True, None),
        ("3d_long_200_300_mask", (1, 200, 8), (1, 300, 8), (1, 300, 8), (1, 200, 300), False, 0.5),
    ]
    for name, qs, ks, vs, ms, causal, scale in cases:
        c = Case("scaled_dot_product_attention", name)
        q, k, v = c.randn(*qs), c.randn(*ks), c.randn(*vs)
        inputs = [q, k, v]
        q64, k64, v64 = f64(q, k, v)
        sc = scale if scale is not None else 1.0 / math.sqrt(qs[-1])
        scores = q64 @ k64.transpose(-2, -1) * sc
        if ms is not None:
            mask = c.randn(*ms, scale=2.0)
            inputs.append(mask)
            scores = scores + mask.to(torch.float64)
        if causal:
            l, s = qs[-2], ks[-2]
            hidden = torch.ones(l, s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(hidden, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v64
        params = {}
        if causal:
            params["is_causal"] = True
        if scale is not None:
            params["scale"] = scale
        w.write(c, inputs, {"out": out}, params)


# --- model-zoo modules -------------------------------------------------------------------------

def zoo_modules(root):
    """tests/data/zoo_modules/: nn.ChannelShuffle, nn.Embedding, nn.MultiheadAttention,
    nn.TransformerEncoderLayer and nn.TransformerEncoder in eval mode, each with random weights:
    <case>.<state_dict key>.npy, the inputs <case>.in0.npy, ... (indices as int32, padding masks as
    bool) and <case>.out.npy (computed in float64). No manifest lines: tests/nn/zoo_modules.cpp knows each case's module."""
    root.mkdir(parents=True, exist_ok=True)

    def write(name, module, inputs, forward):
        c = Case("zoo_modules", name)
        module.eval()
        for p in module.state_dict().values():
            p.copy_(c.randn(*p.shape, scale=0.5))
        for key, p in module.state_dict().items():
            save(root / f"{name}.{key}.npy", p)
        made = [x(c) for x in inputs]
        for i, x in enumerate(made):
            if x.dtype in (torch.bool, torch.int32):
                np.save(root / f"{name}.in{i}.npy", x.numpy())
            else:
                save(root / f"{name}.in{i}.npy", x)
        exact = copy.deepcopy(module).double()  # the reference in float64, rounded once
        save(root / f"{name}.out.npy", forward(exact, *[x.double() if x.is_floating_point() else x for x in made]))

    def randn(*shape):
        return lambda c: c.randn(*shape)

    def mask(*rows):  # one row per batch entry: True = ignore that key
        return lambda c: torch.tensor(rows, dtype=torch.bool)

    write("channel_shuffle_g3", torch.nn.ChannelShuffle(3), [randn(2, 6, 3, 4)], lambda m, x: m(x))
    write("embedding_padding", torch.nn.Embedding(10, 4, padding_idx=0),
          [lambda c: torch.tensor([[1, 0, 9], [3, 3, 7]], dtype=torch.int32)], lambda m, x: m(x.long()))
    mha = lambda m, q, k, v, *mask: m(q, k, v, key_padding_mask=mask[0] if mask else None, need_weights=False)[0]
    write("mha_cross", torch.nn.MultiheadAttention(8, 2), [randn(5, 2, 8), randn(7, 2, 8), randn(7, 2, 8)], mha)
    write("mha_batch_first_mask", torch.nn.MultiheadAttention(8, 4, batch_first=True),
          [randn(2, 5, 8), randn(2, 6, 8), randn(2, 6, 8),
           mask([False, False, True, False, True, True], [False] * 5 + [True])], mha)
    write("mha_no_bias", torch.nn.MultiheadAttention(6, 3, bias=False), [randn(4, 3, 6), randn(4, 3, 6), randn(4, 3, 6)],
          mha)
    layer = lambda m, x, *mask: m(x, src_key_padding_mask=mask[0] if mask else None)
    write("encoder_layer_relu", torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), [randn(5, 2, 8)], layer)
    write("encoder_layer_gelu_norm_first_mask",
          torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, activation="gelu", batch_first=True, norm_first=True),
          [randn(2, 5, 8), mask([False, False, False, True, True], [False] * 5)], layer)
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True), 2,
                                          enable_nested_tensor=False)
    write("encoder_2_layers_mask", encoder, [randn(2, 5, 8), mask([False] * 4 + [True], [False, True, False, False, False])],
          layer)


# --- torchvision models at reduced width -------------------------------------------------------

def zoo_models(root):
    """tests/data/vit/ and tests/data/convnext/: torchvision's VisionTransformer (32x32 images, 16x16
    patches, hidden 64, 2 layers of 4 heads, MLP 128, 10 classes) and ConvNeXt (dims 16/32/64/96,
    depths 1/1/2/1, 10 classes) in eval mode, every state_dict entry random (LayerNorm weights in
    [0.5, 1.5], layer_scale in [0.5, 1.5], so no block is near the identity): <state key>.npy,
    input.npy (2, 3, 32, 32), output.npy (computed in float64), and torchvision_keys.txt, "<key>
    <d0,d1,...>" for every state_dict entry of the default vit_b_16() / convnext_tiny()."""
    from torchvision.models import VisionTransformer, convnext_tiny, vit_b_16
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    def write(name, net, full):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "torchvision_keys.txt", "w") as f:
            for key, value in full.state_dict().items():
                f.write(f"{key} {','.join(str(d) for d in value.shape)}\n")
        c = Case("zoo_models", name)
        net.eval()
        for key, p in net.state_dict().items():
            last = key.rsplit(".", 1)[-1]
            if key.endswith("layer_scale") or (last == "weight" and p.dim() == 1):  # LayerNorm scales
                p.copy_(c.uniform(*p.shape, low=0.5, high=1.5))
            elif last in ("bias", "in_proj_bias"):
                p.copy_(c.randn(*p.shape, scale=0.1))
            elif p.dim() >= 2 and last in ("weight", "in_proj_weight"):
                p.copy_(c.randn(*p.shape, scale=1.0 / math.sqrt(p[0].numel())))  # unit-variance outputs
            else:  # class_token, pos_embedding
                p.copy_(c.randn(*p.shape, scale=0.5))
        for key, p in net.state_dict().items():
            save(folder / f"{key}.npy", p)
        x = c.randn(2, 3, 32, 32)
        save(folder / "input.npy", x)
        save(folder / "output.npy", copy.deepcopy(net).double()(x.double()))

    torch.manual_seed(0)  # the constructors' initial values, all overwritten
    write("vit", VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                   num_classes=10), vit_b_16())
    stages = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, 96, 2), CNBlockConfig(96, None, 1)]
    write("convnext", ConvNeXt(stages, num_classes=10), convnext_tiny())


# --- numpy's own .npy files --------------------------------------------------------------------

def npy_samples(root):
    """Arrays written by numpy for tests/io/npy.cpp: the reader reads them, the writer must
    reproduce the byte-identical files."""
    root.mkdir(parents=True, exist_ok=True)
    f4_2x3 = (np.arange(6, dtype="<f4").reshape(2, 3) / 4 - 0.5).astype("<f4")
    same_bytes = {
        "f4_2x3": f4_2x3,
        "i4_5": np.array([-2, -1, 0, 1, 2147483647], dtype="<i4"),
        "f4_scalar": np.array(3.5, dtype="<f4"),
        "f4_0x3": np.zeros((0, 3), dtype="<f4"),
        "f4_17": np.arange(17, dtype="<f4") - 8,
        "i4_1x2x1x2x1x2x1x2": np.arange(16, dtype="<i4").reshape(1, 2, 1, 2, 1, 2, 1, 2),
        "f4_100000x0": np.zeros((100000, 0), dtype="<f4"),
    }
    for name, a in same_bytes.items():
        np.save(root / f"{name}.npy", a)
    np.save(root / "f8_2x2.npy", np.array([[0.1, -2.5], [1e30, 3.0]], dtype="<f8"))
    np.save(root / "i8_4.npy", np.array([-2147483648, -1, 0, 2147483647], dtype="<i8"))
    np.save(root / "i8_overflow.npy", np.array([0, 2147483648], dtype="<i8"))
    np.save(root / "f4_fortran_2x3.npy", np.asfortranarray(f4_2x3))
    np.save(root / "f4_bigendian_2x3.npy", f4_2x3.astype(">f4"))
    np.save(root / "f2_3.npy", np.array([1, 2, 3], dtype="<f2"))
    for version in ((2, 0), (3, 0)):
        with open(root / f"f4_2x3_v{version[0]}.npy", "wb") as f:
            np.lib.format.write_array(f, f4_2x3, version=version)


# Folders other generators own (gen_modules.py, gen_mobilenet_v2.py, gen_dynamic_shapes.py, and the
# C++ programs make_serialize_v1.cpp and make_serialize_v2.cpp for serialize/); this script leaves
# them alone.
FOREIGN = {"modules", "resnet18", "mobilenet_v2", "dynamic_shapes", "serialize"}


def ptq_sqnr(out_dir=None):
    """PyTorch FX post-training static quantization (prepare_fx, 8 calibration batches, convert_fx)
    of ResNet-18: MinMaxObserver quint8 affine activations, per-channel symmetric qint8 weights.
    Prints the SQNR against float of the fake-quantized model (convert_to_reference_fx: quantize /
    dequantize pairs) and of the converted int8 model, for the width-8 ResNet of tests/data/resnet18
    (calibrated and measured on its input.npy; tests/nn/quant_resnet.cpp checks tracemod's number
    against this one) and for torchvision's ResNet-18 (random weights, batch-norm statistics from
    data, 8 batches of 2x3x224x224). Writes nothing under tests/data; with `out_dir`, the full
    model's state_dict and batches as .npy for examples/quantize_resnet.cpp.
    Run alone: cd / && /usr/bin/python3 tests/reference/gen_goldens.py ptq_sqnr [out_dir]"""
    import sys
    import torchvision
    from torch.ao.quantization import MinMaxObserver, PerChannelMinMaxObserver, QConfig, QConfigMapping
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import gen_modules as gm

    engines = torch.backends.quantized.supported_engines
    torch.backends.quantized.engine = "onednn" if "onednn" in engines else "fbgemm"
    qconfig = QConfig(activation=MinMaxObserver.with_args(dtype=torch.quint8, qscheme=torch.per_tensor_affine),
                      weight=PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))

    def sqnr(ref, y):
        return 10 * math.log10(float((ref.double() ** 2).sum() / ((ref.double() - y.double()) ** 2).sum()))

    def measure(name, net, batches):
        net.eval()
        float_out = torch.cat([net(b) for b in batches])
        prepared = prepare_fx(copy.deepcopy(net), QConfigMapping().set_global(qconfig), example_inputs=(batches[0],))
        for b in batches:
            prepared(b)
        fake = convert_to_reference_fx(copy.deepcopy(prepared))
        converted = convert_fx(prepared)
        fake_out = torch.cat([fake(b) for b in batches])
        int8_out = torch.cat([converted(b) for b in batches])
        print(f"{name} ({torch.backends.quantized.engine}): SQNR fake-quantized {sqnr(float_out, fake_out):.2f} dB, "
              f"converted int8 {sqnr(float_out, int8_out):.2f} dB")

    small = gm.ResNet18(num_classes=10, width=8)
    state = {k: torch.from_numpy(np.load(gm.RESNET / f"{k}.npy")) for k in small.state_dict()}
    state = {k: v.to(small.state_dict()[k].dtype) for k, v in state.items()}
    small.load_state_dict(state)
    measure("resnet18 width 8 (tests/data/resnet18)", small, [torch.from_numpy(np.load(gm.RESNET / "input.npy"))])

    g = gm.seeded("ptq_resnet18")
    full = torchvision.models.resnet18()
    gm.calibrate(full, g, (8, 3, 224, 224))
    batches = [gm.randn(g, 2, 3, 224, 224) for _ in range(8)]
    measure("torchvision resnet18", full, batches)
    if out_dir is not None:
        out = pathlib.Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for key, value in full.state_dict().items():
            save(out / f"{key}.npy", value)
        for i, b in enumerate(batches):
            save(out / f"batch{i}.npy", b)


def main():
    for sub in DATA.iterdir() if DATA.exists() else []:
        if sub.is_dir() and sub.name not in FOREIGN:
            shutil.rmtree(sub)
    DATA.mkdir(parents=True, exist_ok=True)
    w = Writer(DATA)
    torch.set_grad_enabled(False)
    for section in (elementwise, matmul, linear, conv2d, batch_norm, pooling, softmax, shape_ops, pad, interpolate, reductions, norms, attention):
        section(w)
    w.finish()
    npy_samples(DATA / "npy")
    quantization(DATA / "quant")
    zoo_modules(DATA / "zoo_modules")
    ptq_sqnr()
    zoo_models(DATA)
    files = list(DATA.rglob("*.npy"))
    size = sum(f.stat().st_size for f in files)
    print(f"{len(w.lines)} cases, {len(files)} files, {size / 1e6:.2f} MB in {DATA}")


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["ptq_sqnr"]:
        torch.set_grad_enabled(False)
        ptq_sqnr(*sys.argv[2:3])
    else:
        main()
