#!/usr/bin/python3
"""Times each convolution of libtorch's best-mode MobileNetV2 (batch 1) on its own, one thread.

The network is torchvision's, traced, frozen and run through optimize_for_inference, as
tracemod_bench_torch's `torch_best`. Each of its 52 convolutions is cut out of the optimized graph
as the network runs it (oneDNN convolution on oneDNN-layout tensors, then its relu6 and residual
add, if any) and timed two ways: alone, called again and again on one input (its operands stay in
cache), and chained, all 52 run in order on each other's outputs as in the network, each call timed
(weights and outputs then come from memory). The torch profiler cannot do this: the optimized
graph's oneDNN ops record no profiler events. Times are medians of CPU time per call, less the
cost of calling an empty graph. bench_mobilenet_v2's BM_mobilenet_v2_layer[_chained]/<index>
times the same layers in tracemod the same two ways (same index).

Run with Debian's Python, which sees python3-torch and python3-torchvision:
  /usr/bin/python3 bench/torch/mobilenet_v2_layers.py [repetitions]
"""
import statistics
import sys
import time

import torch
import torchvision


def convolutions(optimized):
    """(node, relu6, residual) for each oneDNN convolution of the optimized graph, in order."""
    found = []
    for node in optimized.graph.nodes():
        if node.kind() != "prim::mkldnn_convolution":
            continue
        uses = node.output().uses()
        relu6 = any(u.user.kind() == "prim::MKLDNNHardTanh_" for u in uses)
        # A block's shortcut add takes the block input first, its projection's output second.
        residual = any(u.user.kind() == "prim::BroadcastMKLDNNTensors" and u.offset == 1 for u in uses)
        found.append((node, relu6, residual))
    return found


def layer_function(node, relu6, residual):
    """The convolution, relu6 and residual add of `node` as a graph of (x, w, b, r)."""
    stride, padding, dilation, groups = (v.toIValue() for v in list(node.inputs())[3:])
    ir = f"""
graph(%x : Tensor, %w : Tensor, %b : Tensor, %r : Tensor):
  %s : int[] = prim::Constant[value={list(stride)}]()
  %p : int[] = prim::Constant[value={list(padding)}]()
  %d : int[] = prim::Constant[value={list(dilation)}]()
  %g : int = prim::Constant[value={groups}]()
  %one : int = prim::Constant[value=1]()
  %y0 : Tensor = prim::mkldnn_convolution(%x, %w, %b, %s, %p, %d, %g)
"""
    out = "%y0"
    if relu6:
        ir += "  %y1 : Tensor = prim::MKLDNNHardTanh_[min_val=0., max_val=6.](%y0)\n"
        out = "%y1"
    if residual:
        ir += f"  %r1 : Tensor, %y2 : Tensor = prim::BroadcastMKLDNNTensors(%r, {out})\n"
        ir += "  %y3 : Tensor = aten::add_(%r1, %y2, %one)\n"
        out = "%y3"
    ir += f"  return ({out})\n"
    return torch._C._create_function_from_graph("layer", torch._C.parse_ir(ir)), groups


def cpu_us_per_call(call, calls, repetitions):
    times = []
    for _ in range(repetitions):
        start = time.process_time()
        for _ in range(calls):
            call()
        times.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    chained_runs = 300
    torch.set_num_threads(1)
    net = torchvision.models.mobilenet_v2().eval()
    x = torch.randn(1, 3, 224, 224)
    shapes = []
    hooks = [module.register_forward_hook(lambda m, i, o: shapes.append((tuple(i[0].shape), tuple(o.shape))))
             for module in net.modules() if isinstance(module, torch.nn.Conv2d)]
    with torch.no_grad():
        net(x)
        for hook in hooks:
            hook.remove()
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(net, x).eval()))
        layers = convolutions(optimized)
        assert len(layers) == len(shapes), (len(layers), len(shapes))

        empty = torch._C._create_function_from_graph(
            "empty", torch._C.parse_ir("graph(%x : Tensor, %w : Tensor, %b : Tensor, %r : Tensor):\n  return (%x)\n"))
        probe = torch.randn(1).to_mkldnn()
        overhead = cpu_us_per_call(lambda: empty(probe, probe, probe, probe), 20000, repetitions)

        for _ in range(10):
            optimized(x)
        forward = cpu_us_per_call(lambda: optimized(x), 100, repetitions)

        weights = [[v.node().t("value") for v in list(node.inputs())[1:3]] for node, _, _ in layers]
        functions = [layer_function(*layer) for layer in layers]

        # Each layer alone, on the same input call after call.
        alone = []
        for (function, groups), (weight, bias), (in_shape, out_shape) in zip(functions, weights, shapes):
            xi = torch.randn(in_shape).to_mkldnn()
            r = torch.randn(out_shape).to_mkldnn()
            call = lambda: function(xi, weight, bias, r)  # noqa: E731
            for _ in range(5):
                call()
            flops = 2 * out_shape[1] * out_shape[2] * out_shape[3] * (in_shape[1] // groups) * weight.shape[2] * weight.shape[3]
            calls = max(20, min(2000, int(2e9 / flops / 50)))
            alone.append(cpu_us_per_call(call, calls, repetitions) - overhead)

        # Chained as in the network (each layer on its predecessor's output, the shortcut adds on the
        # block inputs), each call timed on its own.
        times = [[] for _ in layers]
        for _ in range(chained_runs):
            y = x.to_mkldnn()
            block_input = y
            for index, ((_, relu6, _), (function, _)) in enumerate(zip(layers, functions)):
                start = time.thread_time_ns()
                y = function(y, weights[index][0], weights[index][1], block_input)
                times[index].append((time.thread_time_ns() - start) * 1e-3 - overhead)
                if index > 0 and not relu6:  # a projection: the next block's input
                    block_input = y
        chained = [statistics.median(t) for t in times]

        print(f"# libtorch {torch.__version__}, 1 thread, CPU us per call less {overhead:.2f} us of call "
              f"overhead: alone, medians of {repetitions}; chained, medians of {chained_runs} runs")
        print("index\tin\tout\tgroups\tepilogue\talone_us\tchained_us")
        for index, ((_, relu6, residual), (_, groups), (in_shape, out_shape)) in enumerate(zip(layers, functions, shapes)):
            epilogue = "relu6" if relu6 else ("residual" if residual else "bias")
            print(f"{index}\t{'x'.join(map(str, in_shape[1:]))}\t{'x'.join(map(str, out_shape[1:]))}\t{groups}\t"
                  f"{epilogue}\t{alone[index]:.1f}\t{chained[index]:.1f}")
        print(f"# sums: alone {sum(alone):.0f} us, chained {sum(chained):.0f} us; whole forward {forward:.0f} us")

if __name__ == "__main__":
    main()
