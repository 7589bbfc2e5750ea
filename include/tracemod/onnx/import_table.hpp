// The import mapping, in one place: for every ONNX op tracemod reads, the attributes it understands,
// the inputs it needs at import time, and the tracemod ops it records. Anything else (an op, an
// attribute, a value of an attribute) is reported as unsupported. docs/onnx.md lists the table.
#pragma once

#include <tracemod/functional.hpp>
#include <tracemod/onnx/importer.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::onnx::detail {

namespace F = functional;

struct import_rule {
  std::string_view op_type;
  std::vector<std::string_view> attributes;  ///< the attributes this rule reads (others are refused)
  std::vector<int> static_inputs;            ///< inputs read at import time (shapes, bounds)
  void (*convert)(Importer&, const proto::NodeProto&);
};

inline std::string ints_repr(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// 2-D inputs only: ONNX's conv and pools also take 1-D and 3-D ones.
inline void require_2d(const proto::NodeProto& n, const Shape& x) {
  if (x.rank() != 4)
    throw unsupported(n.op_type() + " over " + std::to_string(static_cast<int>(x.rank()) - 2) +
                      " spatial axes (tracemod has the 2-D form only)");
}

/// The spatial geometry of a conv or pool: kernel, strides, dilations, and symmetric padding (from
/// pads or auto_pad); asymmetric padding is unsupported.
struct window {
  F::pair2 kernel, stride, dilation, padding;
};
inline window window_of(const proto::NodeProto& n, const Shape& x, std::vector<std::int64_t> kernel) {
  const auto pair = [&](const char* name, std::int64_t fallback) {
    const std::vector<std::int64_t> v = attr_ints(n, name, {fallback, fallback});
    if (v.size() != 2) throw unsupported("attribute " + std::string(name) + "=" + ints_repr(v) + " is not 2-D");
    return F::pair2{v[0], v[1]};
  };
  window w{{kernel[0], kernel[1]}, pair("strides", 1), pair("dilations", 1), {0, 0}};
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<std::int64_t> p = attr_ints(n, "pads", {0, 0, 0, 0});
    if (p.size() != 4 || p[0] != p[2] || p[1] != p[3])
      throw unsupported("attribute pads=" + ints_repr(p) + " (asymmetric padding; tracemod pads both sides equally)");
    w.padding = {p[0], p[1]};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const auto same = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d) {
      const std::int64_t out = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
      if (total % 2 != 0)
        throw unsupported("attribute auto_pad=" + auto_pad + " pads one side more here (asymmetric padding)");
      return total / 2;
    };
    w.padding = {same(x[2], w.kernel.h, w.stride.h, w.dilation.h), same(x[3], w.kernel.w, w.stride.w, w.dilation.w)};
  } else if (auto_pad != "VALID") {
    throw unsupported("attribute auto_pad=" + auto_pad);
  }
  return w;
}

inline std::vector<std::int64_t> kernel_shape(const proto::NodeProto& n) {
  const std::vector<std::int64_t> k = attr_ints(n, "kernel_shape");
  if (k.size() != 2) throw unsupported("attribute kernel_shape=" + ints_repr(k) + " is not 2-D");
  return k;
}

inline void only_first_output(const proto::NodeProto& n, std::string_view what) {
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty()) throw unsupported("output " + std::to_string(i) + " (" + std::string(what) + ")");
}

/// ONNX's Flatten to 2-D: (d0 * ... * d(axis-1), d(axis) * ... * dn).
inline F::int_list to_2d(const Shape& x, std::size_t axis) {
  std::int64_t rows = 1, cols = 1;
  for (std::size_t i = 0; i < x.rank(); ++i) (i < axis ? rows : cols) *= x[i];
  return {rows, cols};
}
inline F::int_list as_list(const Shape& s) {
  F::int_list l;
  for (std::int64_t d : s) l.push_back(d);
  return l;
}

template <class Op>
void unary(Importer& im, const proto::NodeProto& n) {
  im.bind(n.output(0), im.call<Op>({}, im.tensor(n.input(0))));
}
template <class Op>
void binary(Importer& im, const proto::NodeProto& n) {
  im.bind(n.output(0), im.call<Op>({}, im.tensor(n.input(0)), im.tensor(n.input(1))));
}
/// Min, Max, Sum over one or more inputs: a chain of binary ops (one input is that input).
template <class Op>
void variadic(Importer& im, const proto::NodeProto& n) {
  graph::Node* acc = im.tensor(n.input(0));
  for (int i = 1; i < n.input_size(); ++i) acc = im.call<Op>({}, acc, im.tensor(n.input(i)));
  im.bind(n.output(0), acc, n.input_size() > 1);
}
inline void alias(Importer& im, const proto::NodeProto& n) { im.bind(n.output(0), im.tensor(n.input(0)), false); }

/// The axes of Unsqueeze and Squeeze: input 1 from opset 13 on, the attribute `axes` before; an
/// empty optional when neither is given (Squeeze then drops every extent of 1).
inline std::optional<std::vector<std::int64_t>> axes_of(Importer& im, const proto::NodeProto& n) {
  if (im.opset() >= 13) {
    if (find_attr(n, "axes") != nullptr) throw unsupported("attribute axes (an input from opset 13 on)");
    if (n.input_size() < 2 || n.input(1).empty()) return std::nullopt;
    return im.integers(n, 1, "axes");
  }
  if (find_attr(n, "axes") == nullptr) return std::nullopt;
  return attr_ints(n, "axes");
}

/// `axes` normalised against `rank` (negative axes count from the end), each at most once.
inline std::vector<bool> axis_set(const proto::NodeProto& n, const std::vector<std::int64_t>& axes, std::size_t rank) {
  std::vector<bool> in(rank, false);
  for (std::int64_t a : axes) {
    const std::size_t i = normalize_axis(a, rank, n.op_type());
    if (in[i]) throw unsupported("axes=" + ints_repr(axes) + " names axis " + std::to_string(i) + " twice");
    in[i] = true;
  }
  return in;
}

/// Unsqueeze (axes index the output) and Squeeze (axes index the input and must have extent 1, or
/// every extent of 1 goes): a reshape to the shape they compute.
inline void unsqueeze(Importer& im, const proto::NodeProto& n) {
  graph::Node* x = im.tensor(n.input(0));
  const Shape& s = Importer::shape(x);
  const std::optional<std::vector<std::int64_t>> axes = axes_of(im, n);
  if (!axes) throw unsupported("Unsqueeze without axes");
  const std::size_t rank = s.rank() + axes->size();
  if (rank > Shape::max_rank) throw unsupported("a result of rank " + std::to_string(rank) + " (at most " +
                                                std::to_string(Shape::max_rank) + ")");
  const std::vector<bool> inserted = axis_set(n, *axes, rank);
  F::int_list out;
  for (std::size_t i = 0, j = 0; i < rank; ++i) out.push_back(inserted[i] ? 1 : s[j++]);
  im.bind(n.output(0), im.call<F::reshape_fn>({out}, x));
}
inline void squeeze(Importer& im, const proto::NodeProto& n) {
  graph::Node* x = im.tensor(n.input(0));
  const Shape& s = Importer::shape(x);
  const std::optional<std::vector<std::int64_t>> axes = axes_of(im, n);
  std::vector<bool> removed(s.rank(), false);
  if (axes) {
    removed = axis_set(n, *axes, s.rank());
    for (std::size_t i = 0; i < s.rank(); ++i)
      if (removed[i] && s[i] != 1)
        throw shape_error("Squeeze: axis " + std::to_string(i) + " of an input of shape " + s.to_string() +
                          " has extent " + std::to_string(s[i]) + ", not 1");
  } else {
    for (std::size_t i = 0; i < s.rank(); ++i) removed[i] = s[i] == 1;
  }
  F::int_list out;
  for (std::size_t i = 0; i < s.rank(); ++i)
    if (!removed[i]) out.push_back(s[i]);
  im.bind(n.output(0), im.call<F::reshape_fn>({out}, x));
}

/// Every ONNX op (default domain) import understands. Attributes of old opsets that change nothing
/// here are accepted: `broadcast` (numpy-style broadcasting is the only kind before opset 7 without
/// `axis`), `is_test`, `consumed_inputs`.
inline const std::vector<import_rule>& import_table() {
  static const std::vector<import_rule> table{
      {"Conv", {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         graph::Node* w = im.tensor(n.input(1));
         require_2d(n, Importer::shape(x));
         const Shape& ws = Importer::shape(w);
         if (ws.rank() != 4) throw unsupported("a weight of shape " + ws.to_string());
         const std::vector<std::int64_t> k = attr_ints(n, "kernel_shape", {ws[2], ws[3]});
         if (k != std::vector<std::int64_t>{ws[2], ws[3]})
           throw unsupported("attribute kernel_shape=" + ints_repr(k) + " differs from the weight " + ws.to_string());
         const window g = window_of(n, Importer::shape(x), k);
         im.bind(n.output(0), im.call<F::conv2d_fn>({g.stride, g.padding, g.dilation, attr_int(n, "group", 1)}, x, w, im.optional(n, 2)));
       }},
      {"Gemm", {"alpha", "beta", "transA", "transB", "broadcast"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* a = im.tensor(n.input(0));
         graph::Node* b = im.tensor(n.input(1));
         const bool ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
         const double alpha = attr_float(n, "alpha", 1.0f), beta = attr_float(n, "beta", 1.0f);
         graph::Node* c = n.input_size() > 2 && !n.input(2).empty() ? im.tensor(n.input(2)) : nullptr;
         // A fully connected layer (what PyTorch writes for nn.Linear) is tracemod's linear.
         const Shape& bs = Importer::shape(b);
         if (!ta && tb && alpha == 1.0 && beta == 1.0 && bs.rank() == 2 &&
             (c == nullptr || Importer::shape(c) == Shape{bs[0]})) {
           im.bind(n.output(0), im.call<F::linear_fn>({}, a, b, c != nullptr ? graph::CallArg(c) : graph::CallArg(Value(none))));
           return;
         }
         graph::Node* y = im.call<F::matmul_fn>({ta, tb}, a, b);
         if (alpha != 1.0) y = im.call<F::mul_fn>({}, y, Value(alpha));
         if (c != nullptr) {
           if (beta != 1.0) c = im.call<F::mul_fn>({}, c, Value(beta));
           y = im.call<F::add_fn>({}, y, c);
         }
         im.bind(n.output(0), y);
       }},
      {"MatMul", {}, {}, binary<F::matmul_fn>},
      {"Relu", {}, {}, unary<F::relu_fn>},
      {"Sigmoid", {}, {}, unary<F::sigmoid_fn>},
      {"Tanh", {}, {}, unary<F::tanh_fn>},
      {"Exp", {}, {}, unary<F::exp_fn>},
      {"Neg", {}, {}, unary<F::neg_fn>},
      {"Add", {"broadcast"}, {}, binary<F::add_fn>},
      {"Sub", {"broadcast"}, {}, binary<F::sub_fn>},
      {"Mul", {"broadcast"}, {}, binary<F::mul_fn>},
      {"Div", {"broadcast"}, {}, binary<F::div_fn>},
      {"Min", {}, {}, variadic<F::minimum_fn>},
      {"Max", {}, {}, variadic<F::maximum_fn>},
      {"Sum", {}, {}, variadic<F::add_fn>},
      {"MaxPool", {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         only_first_output(n, "MaxPool's Indices");
         graph::Node* x = im.tensor(n.input(0));
         require_2d(n, Importer::shape(x));
         const window g = window_of(n, Importer::shape(x), kernel_shape(n));
         im.bind(n.output(0), im.call<F::max_pool2d_fn>({g.kernel, g.stride, g.padding, g.dilation,
                                                               attr_int(n, "ceil_mode", 0) != 0}, x));
       }},
      {"AveragePool", {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         require_2d(n, Importer::shape(x));
         const window g = window_of(n, Importer::shape(x), kernel_shape(n));
         im.bind(n.output(0),
                 im.call<F::avg_pool2d_fn>({g.kernel, g.stride, g.padding, attr_int(n, "ceil_mode", 0) != 0,
                                                 attr_int(n, "count_include_pad", 0) != 0}, x));
       }},
      {"GlobalAveragePool", {}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         require_2d(n, Importer::shape(x));
         im.bind(n.output(0), im.call<F::adaptive_avg_pool2d_fn>({F::pair2{1, 1}}, x));
       }},
      {"BatchNormalization", {"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         if (attr_int(n, "training_mode", 0) != 0) throw unsupported("attribute training_mode=1 (batch statistics)");
         if (attr_int(n, "spatial", 1) != 1) throw unsupported("attribute spatial=0");
         only_first_output(n, "running statistics of training mode");
         im.bind(n.output(0), im.call<F::batch_norm_fn>({.training = false, .momentum = 0.1,
                                                         .eps = attr_float(n, "epsilon", 1e-5f)}, im.tensor(n.input(0)), im.tensor(n.input(3)),
                                                         im.tensor(n.input(4)), im.tensor(n.input(1)),
                                                         im.tensor(n.input(2))));
       }},
      {"Flatten", {"axis"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         const Shape& s = Importer::shape(x);
         const std::int64_t axis = attr_int(n, "axis", 1);
         const auto a = axis < 0 ? axis + static_cast<std::int64_t>(s.rank()) : axis;
         if (a < 0 || a > static_cast<std::int64_t>(s.rank()))
           throw unsupported("attribute axis=" + std::to_string(axis) + " for an input of shape " + s.to_string());
         if (a == 1 && s.rank() >= 2)
           im.bind(n.output(0), im.call<F::flatten_fn>({.start_axis = 1, .end_axis = -1}, x));
         else
           im.bind(n.output(0), im.call<F::reshape_fn>({to_2d(s, static_cast<std::size_t>(a))}, x));
       }},
      {"Reshape", {"allowzero", "shape"}, {1},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         // before opset 5 the shape was an attribute
         const std::vector<std::int64_t> target = n.input_size() > 1 ? im.integers(n, 1, "shape") : attr_ints(n, "shape");
         const bool allowzero = attr_int(n, "allowzero", 0) != 0;
         F::int_list shape;
         for (std::size_t i = 0; i < target.size(); ++i) {
           const std::int64_t d = target[i];
           if (d == 0 && !allowzero) {
             if (i >= Importer::shape(x).rank()) throw unsupported("a 0 in shape past the input's rank");
             shape.push_back(Importer::shape(x)[i]);  // ONNX: 0 copies the input's extent
           } else {
             shape.push_back(d);
           }
         }
         im.bind(n.output(0), im.call<F::reshape_fn>({shape}, x));
       }},
      {"Transpose", {"perm"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         std::vector<std::int64_t> reversed;
         for (std::size_t i = Importer::shape(x).rank(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
         F::int_list perm;
         for (std::int64_t p : attr_ints(n, "perm", reversed)) perm.push_back(p);
         im.bind(n.output(0), im.call<F::transpose_fn>({perm}, x));
       }},
      {"Concat", {"axis"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         std::vector<graph::Node*> in;
         for (const std::string& name : n.input()) in.push_back(im.tensor(name));
         im.bind(n.output(0), im.call<F::concat_fn>({attr_int(n, "axis", 0)}, in));
       }},
      {"Softmax", {"axis"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         graph::Node* x = im.tensor(n.input(0));
         const Shape s = Importer::shape(x);
         const std::int64_t axis = attr_int(n, "axis", im.opset() < 13 ? 1 : -1);
         const std::size_t a = normalize_axis(axis, s.rank(), "Softmax");
         if (im.opset() >= 13 || a + 1 == s.rank()) {
           im.bind(n.output(0), im.call<F::softmax_fn>({static_cast<std::int64_t>(a)}, x));
           return;
         }
         // Before opset 13, Softmax normalises over every axis from `axis` on (the input seen as 2-D).
         graph::Node* flat = im.call<F::reshape_fn>({to_2d(s, a)}, x);
         graph::Node* y = im.call<F::softmax_fn>({std::int64_t{1}}, flat);
         im.bind(n.output(0), im.call<F::reshape_fn>({as_list(s)}, y));
       }},
      {"Clip", {"min", "max"}, {1, 2},
       [](Importer& im, const proto::NodeProto& n) {
         std::optional<double> lo, hi;
         if (im.opset() < 11) {
           if (find_attr(n, "min") != nullptr) lo = attr_float(n, "min", 0);
           if (find_attr(n, "max") != nullptr) hi = attr_float(n, "max", 0);
         } else {
           const auto bound = [&](int i) -> std::optional<double> {
             if (i >= n.input_size() || n.input(i).empty()) return std::nullopt;
             const std::vector<double> v = im.numbers(n, i, i == 1 ? "min" : "max");
             if (v.size() != 1) throw unsupported("a bound with " + std::to_string(v.size()) + " values");
             return v[0];
           };
           lo = bound(1);
           hi = bound(2);
         }
         graph::Node* x = im.tensor(n.input(0));
         if (lo == 0.0 && hi == 6.0) return im.bind(n.output(0), im.call<F::relu6_fn>({}, x));
         if (lo == 0.0 && !hi) return im.bind(n.output(0), im.call<F::relu_fn>({}, x));
         graph::Node* y = x;
         if (lo) y = im.call<F::maximum_fn>({}, y, Value(*lo));
         if (hi) y = im.call<F::minimum_fn>({}, y, Value(*hi));
         im.bind(n.output(0), y, y != x);
       }},
      {"Unsqueeze", {"axes"}, {1}, unsqueeze},
      {"Squeeze", {"axes"}, {1}, squeeze},
      {"Identity", {}, {}, alias},
      {"Constant", {"value"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         const proto::AttributeProto* a = find_attr(n, "value");
         if (a == nullptr) throw unsupported("a Constant without attribute 'value'");
         im.add_static(n.output(0), a->t(), false);
       }},
      {"Dropout", {"ratio", "seed", "is_test"}, {2},
       [](Importer& im, const proto::NodeProto& n) {
         only_first_output(n, "Dropout's mask");
         if (n.input_size() > 2 && !n.input(2).empty() && im.numbers(n, 2, "training_mode") != std::vector<double>{0})
           throw unsupported("training_mode=true");
         alias(im, n);
       }},
  };
  return table;
}

[[nodiscard]] inline const import_rule* find_rule(std::string_view op_type) {
  for (const import_rule& r : import_table())
    if (r.op_type == op_type) return &r;
  return nullptr;
}

}  // namespace tracemod::onnx::detail
