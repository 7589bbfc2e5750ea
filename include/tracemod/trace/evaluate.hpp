// Evaluation of a typed graph (the "how" beside the node types' "what", as in Eigen).
//
// Every maximal subtree of elementwise ops runs as ONE SIMD pass over its output: its leaves (inputs,
// attributes, constants, results of heavy ops) are materialised first, then each output vector is
// computed through the whole subtree in registers, with numpy broadcasting of the leaves and no
// intermediate tensors. Heavy ops call their eager kernels; builtin modules run their forward; a user
// module's sub-graph is evaluated in place with its own inputs. A call shared by several consumers
// (same id) is computed once.
//
// The per-element operations are the same functors the eager kernels use, in the same order, so
// results equal eager mode except where the compiler contracts a multiply and a following add into
// one fused multiply-add (allowed by -ffp-contract=fast, g++'s default): then the fused result is the
// more accurate one, within one rounding of eager mode. Under clang with -ffp-contract=fast (which
// tracemod::native sets) contraction may also cross the inlined functors' statements, so any fused
// result may differ from eager mode by such a rounding.
#pragma once

#include <tracemod/kernels/detail/elementwise_broadcast.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/simd.hpp>
#include <tracemod/trace/node.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::trace {

namespace detail {

template <class Op>
concept elementwise_op = requires { typename Op::kernel_op; };

template <class N>
inline constexpr bool is_elementwise_node_v = false;
template <class Op, class P, class S, class... A>
inline constexpr bool is_elementwise_node_v<op_node<Op, P, S, A...>> = elementwise_op<Op>;

template <class N>
inline constexpr bool is_scalar_operand_v = std::same_as<N, scalar_leaf> || is_constant_scalar_v<N>;

/// Number of tensor leaves a fused elementwise subtree reads.
template <class N>
struct leaf_count : std::integral_constant<std::size_t, is_scalar_operand_v<N> ? 0 : 1> {};
template <class Op, class P, class S, class... A>
  requires elementwise_op<Op>
struct leaf_count<op_node<Op, P, S, A...>> : std::integral_constant<std::size_t, (leaf_count<A>::value + ... + 0)> {};
template <class N>
inline constexpr std::size_t leaf_count_v = leaf_count<N>::value;

/// Where a leaf's current row starts and whether it repeats one value along the row.
struct leaf_cursor {
  const float* ptr;
  bool broadcast;
};

/// One output vector of the fused subtree rooted at n, at element i of the current row; the
/// subtree's leaves are cursors[Base, Base + leaf_count_v<N>). Flat: no leaf broadcasts.
template <std::size_t Base, bool Flat, class N>
inline kernels::fbatch eval_batch(const N& n, const leaf_cursor* cursors, std::int64_t i) {
  using kernels::fbatch;
  if constexpr (std::same_as<N, scalar_leaf>) {
    return fbatch(n.value);
  } else if constexpr (is_constant_scalar_v<N>) {
    return fbatch(N::value);
  } else if constexpr (is_elementwise_node_v<N>) {
    using op = typename N::op;
    using kernel = typename op::kernel_op;
    const fbatch a = eval_batch<Base, Flat>(std::get<0>(n.args), cursors, i);
    if constexpr (std::tuple_size_v<decltype(n.args)> == 1) {
      return kernel{}(a);
    } else {
      using first = std::tuple_element_t<0, std::remove_cvref_t<decltype(n.args)>>;
      const fbatch b = eval_batch<Base + leaf_count_v<first>, Flat>(std::get<1>(n.args), cursors, i);
      if constexpr (requires { requires op::reflected; })
        return kernel{}(b, a);
      else
        return kernel{}(a, b);
    }
  } else {
    const leaf_cursor& c = cursors[Base];
    if constexpr (Flat)
      return fbatch::load_unaligned(c.ptr + i);
    else
      return c.broadcast ? fbatch(*c.ptr) : fbatch::load_unaligned(c.ptr + i);
  }
}

/// Runs the subtree over `count` elements of a row into y, the tail through a padded vector so
/// every element goes through the same instructions.
template <bool Flat, class N, std::size_t L>
inline void fused_row(const N& n, const std::array<leaf_cursor, L>& cursors, float* y, std::int64_t count) {
  constexpr auto w = static_cast<std::int64_t>(kernels::simd_width);
  std::int64_t i = 0;
  for (; i + w <= count; i += w) eval_batch<0, Flat>(n, cursors.data(), i).store_unaligned(y + i);
  if (i == count) return;
  const auto rest = static_cast<std::size_t>(count - i);
  alignas(kernels::buffer_alignment) float tails[L == 0 ? 1 : L][kernels::simd_width] = {};
  std::array<leaf_cursor, L> tail_cursors{};
  for (std::size_t l = 0; l < L; ++l) {
    if (!Flat && cursors[l].broadcast)
      std::fill_n(tails[l], kernels::simd_width, *cursors[l].ptr);
    else
      std::memcpy(tails[l], cursors[l].ptr + i, rest * sizeof(float));
    tail_cursors[l] = {tails[l], false};
  }
  alignas(kernels::buffer_alignment) float out[kernels::simd_width];
  eval_batch<0, true>(n, tail_cursors.data(), 0).store_aligned(out);
  std::memcpy(y + i, out, rest * sizeof(float));
}

/// The broadcast pass: the kernels' broadcast rows (each leaf contiguous or repeated along a row),
/// split across threads like the eager broadcasting kernels (kernels::detail::parallel_rows).
template <class N, std::size_t L>
void fused_broadcast(const N& n, const std::array<Tensor, L>& leaves, const Shape& out, float* y) {
  std::array<Shape, L> shapes;
  for (std::size_t l = 0; l < L; ++l) shapes[l] = leaves[l].shape();
  const auto plan = kernels::detail::plan_broadcast_rows<L>(shapes, out);
  kernels::detail::parallel_rows(plan.rows, plan.row_length, [&](std::int64_t first, std::int64_t last) {
    std::array<leaf_cursor, L> cursors{};
    kernels::detail::for_each_broadcast_row(plan, first, last, [&](const std::int64_t* offsets, std::int64_t iy) {
      for (std::size_t l = 0; l < L; ++l)
        cursors[l] = {leaves[l].template data<float>() + offsets[l], plan.row_stride(l) == 0};
      fused_row<false>(n, cursors, y + iy, plan.row_length);
    });
  });
}

/// The values a graph evaluation works with: its inputs and the results of calls by id.
struct eval_frame {
  std::span<const Tensor> inputs;
  std::vector<std::vector<Tensor>> results;
};

template <class N>
const std::vector<Tensor>& evaluate_call(const N& n, eval_frame& f);

/// The tensor a node stands for.
template <class N>
Tensor evaluate(const N& n, eval_frame& f) {
  if constexpr (N::kind == node_kind::input) {
    return f.inputs[N::index];
  } else if constexpr (N::kind == node_kind::get_attr) {
    return n.current();
  } else if constexpr (N::kind == node_kind::constant) {
    return n.value;
  } else if constexpr (N::kind == node_kind::output) {
    return evaluate_call(n.call, f)[N::index];
  } else {
    return evaluate_call(n, f)[0];
  }
}

/// What an eager op receives for an operand.
template <class A>
decltype(auto) eager_operand(const A& a, eval_frame& f) {
  if constexpr (symbolic<A>) {
    return evaluate(a, f);
  } else if constexpr (std::same_as<A, scalar_leaf>) {
    return a.value;
  } else if constexpr (is_constant_scalar_v<A> || std::same_as<A, none_t>) {
    return a;
  } else {  // a list of operands (concat)
    return std::apply([&](const auto&... e) { return std::vector<Tensor>{evaluate(e, f)...}; }, a);
  }
}

template <class N, std::size_t L>
void collect_leaves(const N& n, eval_frame& f, std::array<Tensor, L>& leaves, std::size_t& k);

// A plain fold, not std::apply: each tree level then costs one template instantiation level, not
// seven, so 128-deep chains stay far below g++'s default -ftemplate-depth of 900.
template <class... A, std::size_t L, std::size_t... I>
void collect_operand_leaves(const std::tuple<A...>& args, eval_frame& f, std::array<Tensor, L>& leaves,
                            std::size_t& k, std::index_sequence<I...>) {
  (collect_leaves(std::get<I>(args), f, leaves, k), ...);
}

template <class N, std::size_t L>
void collect_leaves(const N& n, eval_frame& f, std::array<Tensor, L>& leaves, std::size_t& k) {
  if constexpr (is_elementwise_node_v<N>) {
    collect_operand_leaves(n.args, f, leaves, k, std::make_index_sequence<std::tuple_size_v<decltype(n.args)>>{});
  } else if constexpr (!is_scalar_operand_v<N>) {
    leaves[k++] = evaluate(n, f);
  }
}

/// The output shape of the fused subtree at n (leaves from Base on), checked op by op so a
/// broadcasting error names the op that fails, as eager mode would.
template <std::size_t Base, class N, std::size_t L>
Shape fused_shape(const N& n, const std::array<Tensor, L>& leaves, std::string_view consumer,
                  std::string_view operand_name) {
  if constexpr (is_scalar_operand_v<N>) {
    return Shape{};
  } else if constexpr (is_elementwise_node_v<N>) {
    using op = typename N::op;
    using args = std::remove_cvref_t<decltype(n.args)>;
    const Shape a = fused_shape<Base>(std::get<0>(n.args), leaves, op::target, op::operands[0].name);
    if constexpr (std::tuple_size_v<args> == 1) {
      return a;
    } else {
      const Shape b =
          fused_shape<Base + leaf_count_v<std::tuple_element_t<0, args>>>(std::get<1>(n.args), leaves, op::target,
                                                                          op::operands[1].name);
      if constexpr (requires { requires op::reflected; })
        return broadcast_shapes(b, a, op::target);
      else
        return broadcast_shapes(a, b, op::target);
    }
  } else {
    functional::require_float32(consumer, operand_name, leaves[Base]);
    return leaves[Base].shape();
  }
}

/// One SIMD pass for the elementwise subtree rooted at n.
template <class N>
Tensor evaluate_fused(const N& n, eval_frame& f) {
  constexpr std::size_t L = leaf_count_v<N>;
  std::array<Tensor, L> leaves;
  std::size_t k = 0;
  collect_leaves(n, f, leaves, k);
  const Shape out = fused_shape<0>(n, leaves, N::op::target, N::op::operands[0].name);
  bool flat = true;
  for (const Tensor& t : leaves) flat = flat && t.shape() == out;
  Tensor y = Tensor::empty(out, DType::float32, N::op::target);
  if (flat) {
    float* const dst = y.data<float>();
    kernels::detail::parallel_elements(out.numel(), [&](std::int64_t lo, std::int64_t hi) {
      std::array<leaf_cursor, L> cursors{};
      for (std::size_t l = 0; l < L; ++l) cursors[l] = {leaves[l].template data<float>() + lo, false};
      fused_row<true>(n, cursors, dst + lo, hi - lo);
    });
  } else if (out.numel() > 0) {
    fused_broadcast(n, leaves, out, y.data<float>());
  }
  return y;
}

template <class N>
std::vector<Tensor> compute_call(const N& n, eval_frame& f) {
  if constexpr (is_elementwise_node_v<N>) {
    return {evaluate_fused(n, f)};
  } else if constexpr (requires { typename N::op; }) {
    return {std::apply([&](const auto&... a) { return N::op::eager(n.params, eager_operand(a, f)...); }, n.args)};
  } else if constexpr (requires { typename N::graph_type; }) {
    const std::vector<Tensor> args =
        std::apply([&](const auto&... a) { return std::vector<Tensor>{evaluate(a, f)...}; }, n.args);
    return n.graph.run(args);
  } else {  // builtin module
    return {std::apply([&](const auto&... a) { return Tensor(n.module->forward(evaluate(a, f)...)); }, n.args)};
  }
}

/// The results of call n, computed on first use. The slot is a stable reference: results is sized
/// once, before evaluation starts.
template <class N>
const std::vector<Tensor>& evaluate_call(const N& n, eval_frame& f) {
  std::vector<Tensor>& slot = f.results[n.id];
  if (slot.empty()) slot = compute_call(n, f);
  return slot;
}

}  // namespace detail

}  // namespace tracemod::trace
