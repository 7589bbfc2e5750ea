// elemwise.fused: a chain of elementwise ops as one op whose param is a small expression program over
// its inputs and constants (functional/fused_program.hpp), e.g. "relu(x0 * 0.5 + 1)", run as ONE
// SIMD pass: blocks of output vectors go through the whole program, split across threads and with
// the tail rule of the shared elementwise loop (kernels::detail::transform), over the N-ary broadcast
// planner's rows. The run-time twin of the
// compile-time fusion of typed graphs (trace/evaluate.hpp). Each instruction is the functor of the
// eager op it stands for, so a fused result has the bits of the unfused ops.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/repr.hpp>
#include <tracemod/functional/fused_program.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/detail/elementwise_broadcast.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/elementwise.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::functional {

namespace detail {

/// The inputs of a fused pass at one output row: each a contiguous run or one repeated value.
struct fused_operands {
  std::array<const float*, fused_program::max_inputs> ptr{};
  std::array<bool, fused_program::max_inputs> repeated{};
  std::size_t count = 0;

  [[nodiscard]] fused_operands from(std::int64_t i) const noexcept {
    fused_operands o = *this;
    for (std::size_t k = 0; k < count; ++k)
      if (!repeated[k]) o.ptr[k] += i;
    return o;
  }
};

/// y[i] = program(inputs at i) for 0 <= i < n on one thread, a block of vectors at a time. As in
/// kernels::detail::transform, the last n % simd_width elements run in a zero-padded vector, so an
/// element's bits do not depend on its position, and every block is loaded before it is stored.
inline void fused_serial(const fused_program& program, float* y, std::int64_t n, const fused_operands& o) {
  constexpr auto width = static_cast<std::int64_t>(kernels::simd_width);
  std::array<fused_program::block_values, fused_program::max_inputs> in;
  fused_program::block_values out;
  for (std::size_t k = 0; k < o.count; ++k)
    if (o.repeated[k]) in[k].fill(kernels::fbatch(*o.ptr[k]));
  for (std::int64_t i = 0; i < n;) {
    std::size_t full = 0;
    while (full < fused_program::block && i + static_cast<std::int64_t>(full + 1) * width <= n) ++full;
    const std::int64_t tail = full < fused_program::block ? std::min(width, n - i - static_cast<std::int64_t>(full) * width) : 0;
    for (std::size_t k = 0; k < o.count; ++k) {
      if (o.repeated[k]) continue;
      for (std::size_t j = 0; j < full; ++j)
        in[k][j] = kernels::fbatch::load_unaligned(o.ptr[k] + i + static_cast<std::int64_t>(j) * width);
      if (tail > 0)
        in[k][full] = kernels::detail::array_operand{o.ptr[k]}.load_partial(i + static_cast<std::int64_t>(full) * width, tail);
    }
    program.evaluate(in, full + (tail > 0 ? 1 : 0), out.data());
    for (std::size_t j = 0; j < full; ++j) out[j].store_unaligned(y + i + static_cast<std::int64_t>(j) * width);
    i += static_cast<std::int64_t>(full) * width;
    if (tail > 0) {
      alignas(kernels::buffer_alignment) float buf[kernels::simd_width];
      out[full].store_aligned(buf);
      std::copy_n(buf, tail, y + i);
      i += tail;
    }
  }
}

/// fused_serial split across threads as the eager elementwise kernels split.
inline void fused_pass(const fused_program& program, float* y, std::int64_t n, const fused_operands& o) {
  kernels::detail::parallel_elements(
      n, [&](std::int64_t lo, std::int64_t hi) { fused_serial(program, y + lo, hi - lo, o.from(lo)); });
}

}  // namespace detail

struct fused_elementwise_params {
  std::string expr = "x0";
};

/// elemwise.fused[expr](inputs): expr over x0 = inputs[0], x1 = inputs[1], ... with numpy
/// broadcasting of the inputs against each other.
struct fused_elementwise_fn : op_base<fused_elementwise_fn> {
  static constexpr std::string_view name = "fused";
  static constexpr std::string_view target = "elemwise.fused";
  static constexpr call_kind kind = call_kind::function;
  static constexpr bool elementwise = true;
  static constexpr std::array operands{operand{"inputs", operand_kind::tensor_list}};
  using params = fused_elementwise_params;
  static constexpr std::tuple fields{required("expr", &params::expr)};

  /// What a graph prints as the callee: elemwise.fused[relu(x0 * 0.5 + 1)].
  static std::string callee(const params& p) {
    return std::string(target) + "[" + fused_program::parse(p.expr, target).to_string() + "]";
  }

  static Shape infer_shape(const params& p, std::span<const Shape> inputs) {
    const fused_program program = fused_program::parse(p.expr, target);
    if (program.inputs() != inputs.size())
      throw value_error(std::string(target) + ": the program '" + p.expr + "' reads " +
                        std::to_string(program.inputs()) + " inputs, got " + std::to_string(inputs.size()));
    Shape out{};
    for (const Shape& s : inputs) out = broadcast_shapes(out, s, target);
    return out;
  }

  template <class List>
  static Tensor eager(const params& p, const List& list) {
    const std::vector<Tensor> inputs = as_vector(list);
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      require_float32(target, "inputs[" + std::to_string(i) + "]", inputs[i]);
      shapes.push_back(inputs[i].shape());
    }
    const Shape out = infer_shape(p, shapes);
    const fused_program program = fused_program::parse(p.expr, target);
    Tensor y = Tensor::empty(out, DType::float32, target);
    if (out.numel() == 0) return y;
    const kernels::detail::broadcast_rows rows = kernels::detail::plan_broadcast_rows(shapes, out);
    float* const dst = y.data<float>();
    const std::int64_t n = rows.row_length;
    if (rows.rows == 1) {
      detail::fused_operands o;
      o.count = inputs.size();
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        o.ptr[k] = inputs[k].data<float>();
        o.repeated[k] = rows.row_stride(k) == 0;
      }
      detail::fused_pass(program, dst, n, o);
      return y;
    }
    kernels::detail::parallel_rows(rows.rows, n, [&](std::int64_t first, std::int64_t last) {
      kernels::detail::for_each_broadcast_row(rows, first, last, [&](const std::int64_t* offsets, std::int64_t iy) {
        detail::fused_operands o;
        o.count = inputs.size();
        for (std::size_t k = 0; k < inputs.size(); ++k) {
          o.ptr[k] = inputs[k].data<float>() + offsets[k];
          o.repeated[k] = rows.row_stride(k) == 0;
        }
        detail::fused_pass(program, dst + iy, n, o);
      });
    });
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p);

 private:
  static std::vector<Tensor> as_vector(const std::vector<Tensor>& v) { return v; }
  static std::vector<Tensor> as_vector(std::span<const Tensor> v) { return {v.begin(), v.end()}; }
  template <class... T>
  static std::vector<Tensor> as_vector(const std::tuple<T...>& t) {
    return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
  }
};
inline constexpr fused_elementwise_fn fused_elementwise{};
TRACEMOD_REGISTER_BUILTIN_OP(fused_elementwise_fn);

/// The program unfused again: each instruction exported as the op that runs it.
inline void fused_elementwise_fn::onnx_export(onnx_export_context& cx, const params& p) {
  using opcode = fused_program::opcode;
  const fused_program program = fused_program::parse(p.expr, target);
  const std::vector<fused_program::instruction>& code = program.code();
  std::vector<onnx_operand> stack;
  for (std::size_t k = 0; k < code.size(); ++k) {
    const fused_program::instruction& i = code[k];
    const bool last = k + 1 == code.size();
    const std::string out = last ? cx.output() : cx.fresh(cx.output() + "_f");
    if (i.op == opcode::input || i.op == opcode::constant) {
      onnx_operand leaf = i.op == opcode::input ? cx.input(0).list.at(static_cast<std::size_t>(i.input))
                                                : onnx_operand::tensor(cx.graph().scalar(i.value), Shape{});
      if (last) leaf.name = cx.node1("Identity", {leaf.name}, out);
      stack.push_back(std::move(leaf));
      continue;
    }
    const std::size_t arity = i.arity;
    std::vector<onnx_operand> operands(stack.end() - static_cast<std::ptrdiff_t>(arity), stack.end());
    stack.resize(stack.size() - arity);
    onnx_export_context step = cx.with(cx.sub_call(std::move(operands), out));
    cx.graph().export_instruction(static_cast<std::size_t>(i.input), step);
    stack.push_back(onnx_operand::tensor(out, cx.output_shape()));
  }
}

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
