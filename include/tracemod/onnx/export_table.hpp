// The export mapping, in one place: for every op of the op registry (by printed target) and every
// builtin module (by type name), the ONNX nodes it becomes. Builtin modules reuse the ops' emitters
// with the module's hyper-parameters and weights. docs/onnx.md lists the table.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/fused_elementwise.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/onnx/emitter.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::onnx::detail {

namespace F = functional;

/// Emits the nodes of one op call; `params` points to the op's params struct.
using op_exporter = std::function<void(Emitter&, const void* params, const Call&)>;
/// Emits the nodes of one call of a builtin module whose attribute path is `path`.
using module_exporter = std::function<void(Emitter&, const Module&, const std::string& path, const Call&)>;

[[noreturn]] inline void refuse(const Call& c, const std::string& why) {
  throw value_error("onnx export: " + c.where + ": " + why);
}

inline std::vector<std::int64_t> hw(F::pair2 p) { return {p.h, p.w}; }
inline std::vector<std::int64_t> pads(F::pair2 p) { return {p.h, p.w, p.h, p.w}; }

// ---- emitters shared by ops and modules ------------------------------------------------------------

inline void emit_conv(Emitter& e, const F::conv2d_params& p, const std::string& x, const std::string& w,
                      const Shape& w_shape, const std::string* bias, const std::string& out) {
  std::vector<std::string> in{x, w};
  if (bias != nullptr) in.push_back(*bias);
  proto::NodeProto& n = e.node("Conv", in, {out});
  set_attr(n, "kernel_shape", std::vector<std::int64_t>{w_shape[2], w_shape[3]});
  set_attr(n, "strides", hw(p.stride));
  set_attr(n, "pads", pads(p.padding));
  set_attr(n, "dilations", hw(p.dilation));
  set_attr(n, "group", p.groups);
}

/// Inference batch norm; PyTorch's momentum m is ONNX's 1 - m (the weight of the running value).
inline void emit_batch_norm(Emitter& e, const Call& c, const F::batch_norm_params& p, const std::string& x,
                            std::int64_t channels, const std::string* mean, const std::string* var,
                            const std::string* weight, const std::string* bias, const std::string& out) {
  if (p.training)
    refuse(c, "batch norm in training mode (batch statistics) has no ONNX inference equivalent; call eval() first");
  if (mean == nullptr || var == nullptr) refuse(c, "batch norm without running statistics");
  const std::string scale = weight != nullptr ? *weight : e.filled(1.0, channels);
  const std::string shift = bias != nullptr ? *bias : e.filled(0.0, channels);
  proto::NodeProto& n = e.node("BatchNormalization", {x, scale, shift, *mean, *var}, {out});
  set_attr(n, "epsilon", p.eps);
  set_attr(n, "momentum", 1.0 - p.momentum);
}

inline void emit_max_pool(Emitter& e, const F::max_pool2d_params& p, const std::string& x, const std::string& out) {
  proto::NodeProto& n = e.node("MaxPool", {x}, {out});
  set_attr(n, "kernel_shape", hw(p.kernel_size));
  set_attr(n, "strides", hw(p.stride.value_or(p.kernel_size)));
  set_attr(n, "pads", pads(p.padding));
  set_attr(n, "dilations", hw(p.dilation));
  set_attr(n, "ceil_mode", std::int64_t{p.ceil_mode});
}

inline void emit_avg_pool(Emitter& e, const F::avg_pool2d_params& p, const std::string& x, const std::string& out) {
  proto::NodeProto& n = e.node("AveragePool", {x}, {out});
  set_attr(n, "kernel_shape", hw(p.kernel_size));
  set_attr(n, "strides", hw(p.stride.value_or(p.kernel_size)));
  set_attr(n, "pads", pads(p.padding));
  set_attr(n, "ceil_mode", std::int64_t{p.ceil_mode});
  set_attr(n, "count_include_pad", std::int64_t{p.count_include_pad});
}

/// Output (1, 1) is GlobalAveragePool; an output size dividing the input is AveragePool with
/// kernel = stride = input / output (the same bins); other sizes have uneven bins ONNX cannot express.
inline void emit_adaptive_avg_pool(Emitter& e, const Call& c, F::pair2 oshp, const Shape& x_shape, const std::string& x,
                                   const std::string& out) {
  if (oshp == F::pair2{1, 1}) {
    e.node("GlobalAveragePool", {x}, {out});
    return;
  }
  const std::int64_t h = x_shape[2], w = x_shape[3];
  if (oshp.h <= 0 || oshp.w <= 0 || h % oshp.h != 0 || w % oshp.w != 0)
    refuse(c, "adaptive average pooling of " + x_shape.to_string() + " to " + F::repr(oshp) +
                  " has uneven bins, which no ONNX pooling expresses (use an input size divisible by the output size)");
  const F::pair2 k{h / oshp.h, w / oshp.w};
  emit_avg_pool(e, {.kernel_size = k, .stride = k, .padding = 0, .ceil_mode = false, .count_include_pad = true}, x, out);
}

inline void emit_flatten(Emitter& e, const F::flatten_params& p, const Shape& x_shape, const std::string& x,
                         const std::string& out, const std::string& where) {
  if (x_shape.rank() == 0) {
    e.node("Reshape", {x, e.ints({1}, "shape")}, {out});
    return;
  }
  const std::size_t s = normalize_axis(p.start_axis, x_shape.rank(), where);
  const std::size_t end = normalize_axis(p.end_axis, x_shape.rank(), where);
  if (s == 1 && end + 1 == x_shape.rank()) {  // ONNX's Flatten: (d0, d1 * ... * dn)
    set_attr(e.node("Flatten", {x}, {out}), "axis", std::int64_t{1});
    return;
  }
  // Leading axes are copied (0), the merged one inferred (-1): valid for any batch size.
  std::vector<std::int64_t> shape(s, 0);
  shape.push_back(-1);
  for (std::size_t i = end + 1; i < x_shape.rank(); ++i) shape.push_back(x_shape[i]);
  e.node("Reshape", {x, e.ints(shape, "shape")}, {out});
}

/// x @ weight^T + bias: Gemm for a 2-D input, else Transpose + MatMul (+ Add).
inline void emit_linear(Emitter& e, const Call& c) {
  const std::string* bias = c.in[2].kind == Operand::Kind::tensor ? &c.in[2].name : nullptr;
  if (c.in[0].shape.rank() == 2) {
    std::vector<std::string> in{c.in[0].name, c.in[1].name};
    if (bias != nullptr) in.push_back(*bias);
    set_attr(e.node("Gemm", in, {c.out}), "transB", std::int64_t{1});
    return;
  }
  const std::string wt = e.node1("Transpose", {c.in[1].name}, e.fresh(c.in[1].name + "_t"));
  if (bias == nullptr) {
    e.node("MatMul", {c.in[0].name, wt}, {c.out});
    return;
  }
  const std::string prod = e.node1("MatMul", {c.in[0].name, wt}, e.fresh(c.out + "_matmul"));
  e.node("Add", {prod, *bias}, {c.out});
}

/// Elementwise ops by ONNX name; `reflected` swaps the operands (x.__rsub__(y) is y - x).
struct elementwise_mapping {
  std::string_view target;
  std::string_view onnx;
  bool reflected;
};
inline constexpr std::array elementwise_table{
    elementwise_mapping{"nn.relu", "Relu", false},      elementwise_mapping{"nn.sigmoid", "Sigmoid", false},
    elementwise_mapping{"elemwise.neg", "Neg", false},  elementwise_mapping{"__neg__", "Neg", false},
    elementwise_mapping{"elemwise.exp", "Exp", false},  elementwise_mapping{"elemwise.tanh", "Tanh", false},
    elementwise_mapping{"elemwise.add", "Add", false},  elementwise_mapping{"elemwise.sub", "Sub", false},
    elementwise_mapping{"elemwise.mul", "Mul", false},  elementwise_mapping{"elemwise.div", "Div", false},
    elementwise_mapping{"elemwise.minimum", "Min", false}, elementwise_mapping{"elemwise.maximum", "Max", false},
    elementwise_mapping{"__add__", "Add", false},       elementwise_mapping{"__radd__", "Add", true},
    elementwise_mapping{"__sub__", "Sub", false},       elementwise_mapping{"__rsub__", "Sub", true},
    elementwise_mapping{"__mul__", "Mul", false},       elementwise_mapping{"__rmul__", "Mul", true},
    elementwise_mapping{"__truediv__", "Div", false},   elementwise_mapping{"__rtruediv__", "Div", true},
    elementwise_mapping{"__iadd__", "Add", false},      elementwise_mapping{"__isub__", "Sub", false},
    elementwise_mapping{"__imul__", "Mul", false},      elementwise_mapping{"__itruediv__", "Div", false},
};

/// Elemwise module modes (nn::Elemwise::Mode order) as the ONNX ops they chain.
inline constexpr std::array<std::array<std::string_view, 2>, 14> elemwise_modes{{
    {"Relu", ""}, {"Sigmoid", ""}, {"Tanh", ""}, {"Exp", ""}, {"Neg", ""},
    {"Add", ""}, {"Sub", ""}, {"Mul", ""}, {"Div", ""}, {"Min", ""}, {"Max", ""},
    {"Add", "Relu"}, {"Add", "Sigmoid"}, {"Add", "Tanh"},
}};

/// A fused elementwise program, unfused again: one ONNX node per instruction of the postfix code.
inline void emit_fused_elementwise(Emitter& e, const F::fused_program& program, const Call& c) {
  using opcode = F::fused_program::opcode;
  const auto& code = program.code();
  std::vector<std::string> stack;
  for (std::size_t k = 0; k < code.size(); ++k) {
    const F::fused_program::instruction& i = code[k];
    const bool last = k + 1 == code.size();
    const std::string out = last ? c.out : e.fresh(c.out + "_f");
    const auto unary = [&](const std::string& onnx_op) {
      const std::string x = stack.back();
      stack.back() = e.node1(onnx_op, {x}, out);
    };
    const auto binary = [&](const std::string& onnx_op) {
      const std::string b = stack.back();
      stack.pop_back();
      const std::string a = stack.back();
      stack.back() = e.node1(onnx_op, {a, b}, out);
    };
    switch (i.op) {
      case opcode::input: {
        const std::string& x = c.in[0].list.at(static_cast<std::size_t>(i.input)).name;
        stack.push_back(last ? e.node1("Identity", {x}, out) : x);
        break;
      }
      case opcode::constant: stack.push_back(last ? e.node1("Identity", {e.scalar(i.value)}, out) : e.scalar(i.value)); break;
      case opcode::call: {
        const std::string& name = F::fused_functions::instance().at(static_cast<std::size_t>(i.input)).name;
        if (name == "relu6") {
          const std::string x = stack.back();
          stack.back() = e.node1("Clip", {x, e.scalar(0.0), e.scalar(6.0)}, out);
          break;
        }
        static constexpr std::array<std::array<std::string_view, 2>, 11> onnx_ops{{
            {"neg", "Neg"}, {"relu", "Relu"}, {"exp", "Exp"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"},
            {"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}, {"div", "Div"}, {"minimum", "Min"}, {"maximum", "Max"},
        }};
        const auto* it = std::find_if(onnx_ops.begin(), onnx_ops.end(), [&](const auto& m) { return m[0] == name; });
        if (it == onnx_ops.end()) throw value_error("onnx export: elemwise.fused calls '" + name + "', which has no ONNX rule");
        if (code[k].arity == 1)
          unary(std::string((*it)[1]));
        else
          binary(std::string((*it)[1]));
        break;
      }
    }
  }
}

// ---- the tables ------------------------------------------------------------------------------------

template <class Op>
std::pair<std::string, op_exporter> op(void (*fn)(Emitter&, const typename Op::params&, const Call&)) {
  return {std::string(Op::target), [fn](Emitter& e, const void* p, const Call& c) {
            fn(e, *static_cast<const typename Op::params*>(p), c);
          }};
}

inline const std::string* optional_name(const Operand& o) {
  return o.kind == Operand::Kind::tensor ? &o.name : nullptr;
}

/// Every op of the op registry, by target.
inline const std::vector<std::pair<std::string, op_exporter>>& op_table() {
  static const std::vector<std::pair<std::string, op_exporter>> table = [] {
    std::vector<std::pair<std::string, op_exporter>> t;
    for (const elementwise_mapping& m : elementwise_table)
      t.emplace_back(std::string(m.target), [m](Emitter& e, const void*, const Call& c) {
        std::vector<std::string> in;
        for (const Operand& o : c.in) in.push_back(e.value(o));
        if (m.reflected) std::swap(in[0], in[1]);
        e.node(std::string(m.onnx), in, {c.out});
      });
    t.push_back(op<F::relu6_fn>([](Emitter& e, const F::no_params&, const Call& c) {
      e.node("Clip", {c.in[0].name, e.scalar(0.0), e.scalar(6.0)}, {c.out});
    }));
    t.push_back(op<F::conv_bias_activation_fn>(
        [](Emitter& e, const F::conv_bias_activation_params& p, const Call& c) {
          // Conv, then Add of the residual z, then the activation: the three ops the kernel fuses.
          const F::conv2d_params conv{p.stride, p.padding, p.dilation, p.groups};
          const kernels::activation act = F::conv_bias_activation_fn::activation_of(p.nonlinear_mode);
          const bool residual = c.in[3].kind == Operand::Kind::tensor;
          const bool activated = act != kernels::activation::none;
          const std::string conv_out = residual || activated ? e.fresh(c.out + "_conv") : c.out;
          emit_conv(e, conv, c.in[0].name, c.in[1].name, c.in[1].shape, optional_name(c.in[2]), conv_out);
          std::string y = conv_out;
          if (residual) y = e.node1("Add", {y, c.in[3].name}, activated ? e.fresh(c.out + "_add") : c.out);
          if (act == kernels::activation::relu) e.node("Relu", {y}, {c.out});
          if (act == kernels::activation::relu6) e.node("Clip", {y, e.scalar(0.0), e.scalar(6.0)}, {c.out});
        }));
    t.push_back(op<F::fused_elementwise_fn>([](Emitter& e, const F::fused_elementwise_params& p, const Call& c) {
      emit_fused_elementwise(e, F::fused_program::parse(p.expr, F::fused_elementwise_fn::target), c);
    }));
    t.push_back(op<F::conv2d_fn>([](Emitter& e, const F::conv2d_params& p, const Call& c) {
      emit_conv(e, p, c.in[0].name, c.in[1].name, c.in[1].shape, optional_name(c.in[2]), c.out);
    }));
    t.push_back(op<F::matmul_fn>([](Emitter& e, const F::matmul_params& p, const Call& c) {
      // Transpose's default permutation reverses every axis; matmul's flags swap only the last two.
      const auto operand = [&](const Operand& o, bool transposed) {
        if (!transposed || o.shape.rank() < 2) return o.name;
        std::vector<std::int64_t> perm;
        for (std::size_t i = 0; i < o.shape.rank(); ++i) perm.push_back(static_cast<std::int64_t>(i));
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        const std::string t = e.fresh(o.name + "_t");
        set_attr(e.node("Transpose", {o.name}, {t}), "perm", perm);
        return t;
      };
      e.node("MatMul", {operand(c.in[0], p.transpose_a), operand(c.in[1], p.transpose_b)}, {c.out});
    }));
    t.push_back(op<F::linear_fn>([](Emitter& e, const F::no_params&, const Call& c) { emit_linear(e, c); }));
    t.push_back(op<F::batch_norm_fn>([](Emitter& e, const F::batch_norm_params& p, const Call& c) {
      emit_batch_norm(e, c, p, c.in[0].name, c.in[0].shape[1], optional_name(c.in[1]), optional_name(c.in[2]),
                      optional_name(c.in[3]), optional_name(c.in[4]), c.out);
    }));
    t.push_back(op<F::max_pool2d_fn>([](Emitter& e, const F::max_pool2d_params& p, const Call& c) {
      emit_max_pool(e, p, c.in[0].name, c.out);
    }));
    t.push_back(op<F::avg_pool2d_fn>([](Emitter& e, const F::avg_pool2d_params& p, const Call& c) {
      emit_avg_pool(e, p, c.in[0].name, c.out);
    }));
    t.push_back(op<F::adaptive_avg_pool2d_fn>([](Emitter& e, const F::adaptive_avg_pool2d_params& p, const Call& c) {
      emit_adaptive_avg_pool(e, c, p.oshp, c.in[0].shape, c.in[0].name, c.out);
    }));
    t.push_back(op<F::flatten_fn>([](Emitter& e, const F::flatten_params& p, const Call& c) {
      emit_flatten(e, p, c.in[0].shape, c.in[0].name, c.out, c.where);
    }));
    t.push_back(op<F::reshape_fn>([](Emitter& e, const F::reshape_params& p, const Call& c) {
      std::vector<std::int64_t> shape(p.target_shape.begin(), p.target_shape.end());
      const bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
      const Shape& x = c.in[0].shape;
      // A target that keeps the traced batch size in front copies it (0), so any batch size reshapes.
      if (e.options().dynamic_batch && !has_zero && !shape.empty() && x.rank() >= 1 && shape[0] == x[0]) shape[0] = 0;
      proto::NodeProto& n = e.node("Reshape", {c.in[0].name, e.ints(shape, "shape")}, {c.out});
      if (has_zero) set_attr(n, "allowzero", std::int64_t{1});  // a literal zero extent, not "copy"
    }));
    t.push_back(op<F::transpose_fn>([](Emitter& e, const F::transpose_params& p, const Call& c) {
      set_attr(e.node("Transpose", {c.in[0].name}, {c.out}), "perm",
               std::vector<std::int64_t>(p.pattern.begin(), p.pattern.end()));
    }));
    t.push_back(op<F::concat_fn>([](Emitter& e, const F::concat_params& p, const Call& c) {
      std::vector<std::string> in;
      for (const Operand& o : c.in[0].list) in.push_back(o.name);
      const std::size_t axis = normalize_axis(p.axis, c.out_shape.rank(), c.where);
      set_attr(e.node("Concat", in, {c.out}), "axis", static_cast<std::int64_t>(axis));
    }));
    t.push_back(op<F::softmax_fn>([](Emitter& e, const F::softmax_params& p, const Call& c) {
      const Shape& x = c.in[0].shape;
      if (x.rank() == 0) refuse(c, "softmax of a scalar");
      set_attr(e.node("Softmax", {c.in[0].name}, {c.out}), "axis",
               static_cast<std::int64_t>(F::softmax_fn::resolved_axis(p, x)));
    }));
    return t;
  }();
  return table;
}

template <class M>
std::pair<std::string, module_exporter> module(std::string name,
                                               void (*fn)(Emitter&, const M&, const std::string&, const Call&)) {
  return {std::move(name), [fn](Emitter& e, const Module& m, const std::string& path, const Call& c) {
            fn(e, dynamic_cast<const M&>(m), path, c);
          }};
}

inline void export_conv_module(Emitter& e, const nn::Conv2d& m, const std::string& path, const std::string& x,
                               const std::string& out) {
  const F::conv2d_params p{m.stride, m.padding, m.dilation, m.groups};
  const std::string w = e.weight(m.weight, path + ".weight");
  const std::string b = m.bias.defined() ? e.weight(m.bias, path + ".bias") : std::string();
  emit_conv(e, p, x, w, m.weight.shape(), m.bias.defined() ? &b : nullptr, out);
}

inline void export_bn_module(Emitter& e, const Call& c, const nn::BatchNorm2d& m, const std::string& path,
                             const std::string& x, const std::string& out) {
  if (m.training()) refuse(c, "BatchNorm2d '" + path + "' is in training mode; call eval() before exporting");
  const auto tensor = [&](const Tensor& t, const char* name, std::string& keep) -> const std::string* {
    if (!t.defined()) return nullptr;
    keep = e.weight(t, path + "." + name);
    return &keep;
  };
  std::string mean, var, weight, bias;
  const F::batch_norm_params p{.training = false, .momentum = m.momentum.value_or(0.1), .eps = m.eps};
  emit_batch_norm(e, c, p, x, m.num_features, tensor(m.running_mean, "running_mean", mean),
                  tensor(m.running_var, "running_var", var), tensor(m.weight, "weight", weight),
                  tensor(m.bias, "bias", bias), out);
}

/// The fused modules: Conv, BatchNormalization, and Relu for ConvBnRelu2d.
inline void export_conv_bn(Emitter& e, const Call& c, const nn::Conv2d& conv, const nn::BatchNorm2d& bn,
                           const std::string& path, bool relu) {
  const std::string conv_out = e.fresh(c.out + "_conv");
  export_conv_module(e, conv, path + ".conv", c.in[0].name, conv_out);
  const std::string bn_out = relu ? e.fresh(c.out + "_bn") : c.out;
  export_bn_module(e, c, bn, path + ".bn", conv_out, bn_out);
  if (relu) e.node("Relu", {bn_out}, {c.out});
}

/// Every builtin module, by type name.
inline const std::vector<std::pair<std::string, module_exporter>>& module_table() {
  static const std::vector<std::pair<std::string, module_exporter>> table = [] {
    std::vector<std::pair<std::string, module_exporter>> t;
    t.push_back(module<nn::Conv2d>("Conv2d", [](Emitter& e, const nn::Conv2d& m, const std::string& path, const Call& c) {
      export_conv_module(e, m, path, c.in[0].name, c.out);
    }));
    t.push_back(module<nn::BatchNorm2d>(
        "BatchNorm2d", [](Emitter& e, const nn::BatchNorm2d& m, const std::string& path, const Call& c) {
          export_bn_module(e, c, m, path, c.in[0].name, c.out);
        }));
    t.push_back(module<nn::Linear>("Linear", [](Emitter& e, const nn::Linear& m, const std::string& path, const Call& c) {
      Call call = c;
      Operand w{.kind = Operand::Kind::tensor, .name = e.weight(m.weight, path + ".weight"), .shape = m.weight.shape()};
      Operand b;
      if (m.bias.defined()) b = {.kind = Operand::Kind::tensor, .name = e.weight(m.bias, path + ".bias"), .shape = m.bias.shape()};
      call.in = {c.in[0], w, b};
      emit_linear(e, call);
    }));
    t.push_back(module<nn::ReLU>("ReLU", [](Emitter& e, const nn::ReLU&, const std::string&, const Call& c) {
      e.node("Relu", {c.in[0].name}, {c.out});
    }));
    t.push_back(module<nn::ReLU6>("ReLU6", [](Emitter& e, const nn::ReLU6&, const std::string&, const Call& c) {
      e.node("Clip", {c.in[0].name, e.scalar(0.0), e.scalar(6.0)}, {c.out});
    }));
    t.push_back(module<nn::Identity>("Identity", [](Emitter& e, const nn::Identity&, const std::string&, const Call& c) {
      e.node("Identity", {c.in[0].name}, {c.out});
    }));
    t.push_back(module<nn::Dropout>("Dropout", [](Emitter& e, const nn::Dropout& m, const std::string& path, const Call& c) {
      if (m.training() && m.p != 0.0) refuse(c, "Dropout '" + path + "' is in training mode; call eval() before exporting");
      e.node("Identity", {c.in[0].name}, {c.out});
    }));
    t.push_back(module<nn::MaxPool2d>("MaxPool2d", [](Emitter& e, const nn::MaxPool2d& m, const std::string&, const Call& c) {
      emit_max_pool(e, m.params, c.in[0].name, c.out);
    }));
    t.push_back(module<nn::AvgPool2d>("AvgPool2d", [](Emitter& e, const nn::AvgPool2d& m, const std::string&, const Call& c) {
      emit_avg_pool(e, m.params, c.in[0].name, c.out);
    }));
    t.push_back(module<nn::AdaptiveAvgPool2d>(
        "AdaptiveAvgPool2d", [](Emitter& e, const nn::AdaptiveAvgPool2d& m, const std::string&, const Call& c) {
          emit_adaptive_avg_pool(e, c, m.output_size, c.in[0].shape, c.in[0].name, c.out);
        }));
    t.push_back(module<nn::Flatten>("Flatten", [](Emitter& e, const nn::Flatten& m, const std::string&, const Call& c) {
      emit_flatten(e, m.params, c.in[0].shape, c.in[0].name, c.out, c.where);
    }));
    t.push_back(module<nn::Elemwise>("Elemwise", [](Emitter& e, const nn::Elemwise& m, const std::string&, const Call& c) {
      const auto& ops = elemwise_modes[static_cast<std::size_t>(m.mode)];
      std::vector<std::string> in;
      for (const Operand& o : c.in) in.push_back(o.name);
      if (ops[1].empty()) {
        e.node(std::string(ops[0]), in, {c.out});
        return;
      }
      const std::string first = e.node1(std::string(ops[0]), in, e.fresh(c.out + "_" + std::string(ops[0])));
      e.node(std::string(ops[1]), {first}, {c.out});
    }));
    t.push_back(module<nn::ConvBn2d>("ConvBn2d", [](Emitter& e, const nn::ConvBn2d& m, const std::string& path, const Call& c) {
      export_conv_bn(e, c, m.conv, m.bn, path, false);
    }));
    t.push_back(module<nn::ConvBnRelu2d>(
        "ConvBnRelu2d", [](Emitter& e, const nn::ConvBnRelu2d& m, const std::string& path, const Call& c) {
          export_conv_bn(e, c, m.conv, m.bn, path, true);
        }));
    return t;
  }();
  return table;
}

template <class Table>
auto find_in(const Table& table, std::string_view key) -> const typename Table::value_type::second_type* {
  for (const auto& [k, fn] : table)
    if (k == key) return &fn;
  return nullptr;
}

}  // namespace tracemod::onnx::detail
