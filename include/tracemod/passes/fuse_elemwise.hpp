// FuseElemwise (beyond MegEngine; run once; requires FoldConstant): a maximal tree of elementwise
// op calls whose intermediate results each feed only the next op becomes one elemwise.fused call,
// run as a single SIMD pass over its inputs (functional/fused_elementwise.hpp: the shared elementwise
// loop), e.g.
//   y = x * 0.5;  z = y + 1.0;  r = nn.relu(z)   ->   r = elemwise.fused[relu(x0 * 0.5 + 1.0)](x, )
// An op takes part when its registry entry is elementwise and its kernel is a fused function
// (op_entry::fused_function, from the op's definition: any registered op's, a user's included). Numbers and one-element float32
// Constants that cannot widen the result become literals; other operands become the fused call's
// inputs x0, x1, ... (each distinct node once). Refused: a single op alone, an intermediate result
// used elsewhere or returned, more inputs or stack slots than a fused_program holds.
#pragma once

#include <tracemod/functional/fused_elementwise.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/passes/pass.hpp>
#include <tracemod/passes/rewrite.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace tracemod::passes {

namespace detail {

/// Whether `e` is a call FuseElemwise can turn into one instruction.
inline bool fusable_elemwise(const graph::Expr& e) {
  return e.op() != nullptr && e.op()->elementwise && e.op()->fused_function && e.output_count() == 1 &&
         static_cast<const graph::TensorNode*>(e.output())->dtype() == DType::float32;
}

/// The program of the tree of fusable exprs rooted at one expr, and its inputs.
class elemwise_region {
 public:
  elemwise_region(const graph::Graph& g, const graph::Expr& root)
      : g_(g), rank_(static_cast<const graph::TensorNode*>(root.output())->shape().rank()) {
    emit(root);
  }

  /// Whether the region is worth one fused call and fits a fused_program.
  [[nodiscard]] bool fusable() const {
    const auto depth = program_.stack_depth();
    return ok_ && ops_ >= 2 && !inputs_.empty() && depth && *depth <= functional::fused_program::max_depth;
  }
  [[nodiscard]] const functional::fused_program& program() const noexcept { return program_; }
  [[nodiscard]] const std::vector<graph::Node*>& inputs() const noexcept { return inputs_; }

 private:
  void emit(const graph::Expr& e) {
    ++ops_;
    const functional::op_entry& op = *e.op();
    const std::vector<graph::CallArg> args = e.args();
    const std::size_t n = op.operands.size();
    if (n == 2 && op.reflected) {  // other OP self
      operand(args[1], e);
      operand(args[0], e);
    } else {
      for (std::size_t i = 0; i < n; ++i) operand(args[i], e);
    }
    program_.push_call(*op.fused_function);
  }

  void operand(const graph::CallArg& a, const graph::Expr& consumer) {
    if (const auto* v = std::get_if<Value>(&a)) {
      if (!v->is_number()) ok_ = false;
      program_.push_constant(v->is_number() ? static_cast<float>(v->number()) : 0.0f);
      return;
    }
    const auto* node = std::get_if<graph::Node*>(&a);
    if (node == nullptr) {
      ok_ = false;
      program_.push_constant(0.0f);
      return;
    }
    graph::Node* x = *node;
    if (graph::Expr* producer = x->expr(); producer != nullptr && absorbable(*producer, *x, consumer)) {
      emit(*producer);
      return;
    }
    // A one-element constant of no higher rank than the result broadcasts without widening it.
    if (const Tensor* t = constant_tensor(x);
        t != nullptr && t->dtype() == DType::float32 && t->numel() == 1 && t->shape().rank() <= rank_) {
      program_.push_constant(t->data<float>()[0]);
      return;
    }
    const auto it = std::find(inputs_.begin(), inputs_.end(), x);
    if (it == inputs_.end() && inputs_.size() == functional::fused_program::max_inputs) {
      ok_ = false;
      program_.push_input(0);
      return;
    }
    if (it == inputs_.end()) inputs_.push_back(x);
    program_.push_input(static_cast<std::size_t>(std::find(inputs_.begin(), inputs_.end(), x) - inputs_.begin()));
  }

  /// `producer` computes `x` for `consumer` only: x is used by nothing else and is not returned.
  [[nodiscard]] bool absorbable(const graph::Expr& producer, const graph::Node& x, const graph::Expr& consumer) const {
    if (!fusable_elemwise(producer)) return false;
    for (const graph::Node* o : g_.outputs())
      if (o == &x) return false;
    return std::all_of(x.users().begin(), x.users().end(), [&](const graph::Expr* u) { return u == &consumer; });
  }

  const graph::Graph& g_;
  std::size_t rank_;
  functional::fused_program program_;
  std::vector<graph::Node*> inputs_;
  int ops_ = 0;
  bool ok_ = true;
};

}  // namespace detail

inline graph::Expr* fuse_elemwise(graph::Graph& g, graph::Expr& root) {
  if (!detail::fusable_elemwise(root)) return nullptr;
  const detail::elemwise_region region(g, root);
  if (!region.fusable()) return nullptr;
  graph::Node* out = nullptr;
  {
    Builder b(g, root);
    out = b.call(functional::entry_of<functional::fused_elementwise_fn>(), {region.inputs()},
                 {Value(region.program().to_string())});
  }
  return replace_if_same_shape(g, root.output(), out);
}

inline Pass fuse_elemwise_pass() {
  return {.name = "FuseElemwise",
          .requirements = {"FoldConstant"},
          .run = [](graph::Graph& g) {
            // Last first: the root of a tree is visited before the exprs it takes in.
            return rewrite_backward(g, [&](graph::Expr& e) { return fuse_elemwise(g, e); });
          }};
}

}  // namespace tracemod::passes
