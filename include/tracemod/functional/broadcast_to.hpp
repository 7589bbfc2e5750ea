// broadcast_to: a copy of a tensor repeated along the axes numpy broadcasting would stretch
// (MegEngine's F.broadcast_to, PyTorch's Tensor.expand to a full shape, ONNX's Expand). Any dtype.
#pragma once

#include <tracemod/core/dim.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/params.hpp>
#include <tracemod/kernels/broadcast_map.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct broadcast_to_params {
  int_list shape;
};

/// `inp` broadcast to `shape`: inp's shape, right-aligned, must have each extent equal to the
/// target's or 1.
struct broadcast_to_fn : op_base<broadcast_to_fn> {
  static constexpr std::string_view name = "broadcast_to";
  static constexpr std::string_view target = "tensor.broadcast_to";
  static constexpr call_kind kind = call_kind::function;
  static constexpr scale_rule scaling = scale_rule::linear;
  static constexpr bool any_dtype = true;  // moves elements: every dtype alike
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = broadcast_to_params;
  static constexpr std::tuple fields{required("shape", &params::shape)};

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    Shape out;
    for (std::int64_t d : p.shape) {
      if (d < 0 || out.rank() == Shape::max_rank)
        throw shape_error(std::string(target) + ": cannot broadcast " + x.to_string() + " to " + repr(p.shape) +
                          " (extents must be >= 0, rank at most " + std::to_string(Shape::max_rank) + ")");
      out.push_back(d);
    }
    if (x.rank() > out.rank() || broadcast_shapes(x, out, target) != out)
      throw shape_error(std::string(target) + ": cannot broadcast " + x.to_string() + " to " + out.to_string());
    return out;
  }
  static Dims infer_dims(const params& p, const ShapeDims&) { return Dims(p.shape.begin(), p.shape.end()); }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);
    const Shape out = infer_shape(p, x.shape());
    Tensor y = Tensor::empty(out, x.dtype(), target);
    visit_dtype(x.dtype(), [&]<class T>(T) {
      kernels::broadcast_map(out, y.data<T>(), [](T v) { return v; }, {x.shape()}, x.data<T>());
    });
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    const std::vector<std::int64_t> shape(p.shape.begin(), p.shape.end());
    cx.node("Expand", {cx.input(0).name, cx.graph().ints(shape, "shape")}, {cx.output()});
  }
  /// Expand broadcasts both ways: the result is the broadcast of the input's shape and `shape`.
  static constexpr std::array onnx_import_types{std::string_view("Expand")};
  static constexpr std::array onnx_static_inputs{1};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value x = cx.tensor(0);
    if (!cx.is_static(1)) return import_run_time_shape(cx, x);
    const std::vector<std::int64_t> s = cx.integers(1, "shape");
    if (s.size() > Shape::max_rank) cx.unsupported("a shape of rank " + std::to_string(s.size()));
    Shape want;
    for (std::int64_t d : s) {
      if (d < 0) cx.unsupported("a negative extent in shape " + ints_repr(s));
      want.push_back(d);
    }
    const Shape out = broadcast_shapes(cx.shape(x), want, "Expand");
    if (out == cx.shape(x)) return cx.bind(x, false);
    int_list l;
    for (std::int64_t d : out) l.push_back(d);
    cx.bind(cx.call<broadcast_to_fn>({l}, x));
  }

 private:
  /// A shape computed at run time (from Shape of a dynamic input): tensor.expand_to
  /// (shape_values.hpp), torch's one-way expand, which is ONNX's Expand wherever the shape has x's
  /// rank or more and each extent equals x's or x's is 1. Where ONNX would broadcast the other way
  /// (an extent of 1 over a larger one of x, a shape of lower rank) the import refuses, at the
  /// example extents; at other extents expand_to refuses when run.
  static void import_run_time_shape(onnx_import_context& cx, onnx_value x) {
    const Shape& in = cx.shape(x);
    const onnx_value shape = cx.tensor(1);
    const Shape& s = cx.shape(shape);
    if (s.rank() != 1 || s[0] < static_cast<std::int64_t>(in.rank()))
      cx.unsupported("a shape computed at run time, of shape " + s.to_string() + ", for an input of shape " +
                     in.to_string() + " (tensor.expand_to needs an extent for each axis of the input)");
    onnx_value out;
    try {
      out = cx.call("tensor.expand_to", {x, shape}, {});
    } catch (const shape_error& e) {
      cx.unsupported(std::string("a shape computed at run time that broadcasts the input both ways (") + e.what() +
                     "); tensor.expand_to broadcasts the input's extents of 1 only");
    }
    cx.bind(out);
  }
};
inline constexpr broadcast_to_fn broadcast_to{};
TRACEMOD_REGISTER_BUILTIN_OP(broadcast_to_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
