// What an expr and a graph cost (functional/cost.hpp), from the shapes of their nodes: no kernel
// runs. Expr::cost asks the op registry entry of a call, the callee graph of a user module call
// (summed, recursively) or the builtin module's cost (its functional equivalent).
#pragma once

#include <tracemod/functional/cost.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/graph.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tracemod::graph {

/// The cost of every call of `g`, module calls included once (their callee graphs summed).
inline functional::op_cost total_cost(const Graph& g) {
  functional::op_cost c;
  for (const auto& e : g.expr_list_()) c += e->cost();
  return c;
}

namespace detail {

/// The shape recorded on a tensor node.
inline Shape recorded_shape(const Node* n) {
  return n->is_tensor() ? static_cast<const TensorNode*>(n)->shape() : Shape{};
}

/// The operands of an op call as erased shapes; `lists` keeps the shapes list operands point to.
inline std::vector<functional::erased_shape> operand_shapes(const Expr& e, const std::function<Shape(const Node*)>& shape_of,
                                                            std::vector<std::vector<Shape>>& lists) {
  using k = functional::erased_operand::kind;
  const std::vector<CallArg> args = e.args();
  const std::size_t n = e.op()->operands.size();
  std::vector<functional::erased_shape> shapes(n);
  lists.assign(n, {});
  for (std::size_t i = 0; i < n && i < args.size(); ++i) {
    if (const auto* node = std::get_if<Node*>(&args[i])) {
      shapes[i] = {k::tensor, shape_of(*node), {}};
    } else if (const auto* list = std::get_if<std::vector<Node*>>(&args[i])) {
      for (const Node* x : *list) lists[i].push_back(shape_of(x));
      shapes[i] = {k::list, Shape{}, lists[i]};
    } else {
      shapes[i] = {std::get<Value>(args[i]).is_none() ? k::none : k::scalar, Shape{}, {}};
    }
  }
  return shapes;
}

/// The shapes of a module call's tensor arguments (after the module).
inline std::vector<Shape> module_arg_shapes(const Expr& e, const std::function<Shape(const Node*)>& shape_of) {
  std::vector<Shape> shapes;
  for (std::size_t i = 1; i < e.inputs().size(); ++i) shapes.push_back(shape_of(e.inputs()[i]));
  return shapes;
}

}  // namespace detail

inline functional::op_cost Expr::cost() const { return cost(detail::recorded_shape); }

inline functional::op_cost Expr::cost(const std::function<Shape(const Node*)>& shape_of) const {
  if (!is_call() || output_count() == 0) return {};
  if (op_ == nullptr) {
    if (const Graph* sub = graph()) return total_cost(*sub);
    const Module* m = static_cast<const ModuleNode*>(inputs_.front())->owner();
    if (m == nullptr) return {};
    return m->cost_erased(detail::module_arg_shapes(*this, shape_of)).value_or(functional::op_cost{});
  }
  if (!op_->cost) return {};
  std::vector<std::vector<Shape>> lists;
  const std::vector<functional::erased_shape> shapes = detail::operand_shapes(*this, shape_of, lists);
  return op_->cost(op_params(), shapes, shape_of(output(0)));
}

inline Shape Expr::infer_shape(const std::function<Shape(const Node*)>& shape_of) const {
  if (!is_call() || output_count() != 1 || graph() != nullptr)
    detail::fail_at(*this, "infer_shape needs an op call or a call of a builtin module with one output");
  if (op_ == nullptr) {
    const Module* m = static_cast<const ModuleNode*>(inputs_.front())->owner();
    if (m == nullptr) detail::fail_at(*this, "the called module is missing");
    return m->infer_shape_erased(detail::module_arg_shapes(*this, shape_of));
  }
  std::vector<std::vector<Shape>> lists;
  const std::vector<functional::erased_shape> shapes = detail::operand_shapes(*this, shape_of, lists);
  return op_->infer_shape(op_params(), shapes);
}

}  // namespace tracemod::graph
