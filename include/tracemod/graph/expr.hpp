// Exprs of the runtime graph (MegEngine's Expr kinds): Input, GetAttr, CallMethod, CallFunction and
// Constant. An expr consumes nodes (its inputs, in argument order) and owns the nodes it produces.
// A call keeps its arguments in canonical form: positional arguments (operands, then positional
// params with defaults filled in) and keyword-only params, each a node, a list of nodes or a
// constant Value.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/graph/node.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod::graph {

enum class ExprKind : std::uint8_t { input, get_attr, call_method, call_function, constant };

/// What a node holds while a graph runs: a value (usually a tensor) or a module.
using NodeValue = std::variant<Value, const Module*>;

/// One argument of a call as the user sees it: a node, a list of nodes, or a constant.
using CallArg = std::variant<Node*, std::vector<Node*>, Value>;

class Expr {
 public:
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  ~Expr();

  [[nodiscard]] ExprKind kind() const noexcept { return kind_; }
  [[nodiscard]] std::int64_t id() const noexcept { return id_; }
  [[nodiscard]] Graph* top_graph() const noexcept { return graph_; }
  [[nodiscard]] const std::vector<Node*>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] std::vector<Node*> outputs() const {
    std::vector<Node*> v;
    v.reserve(outputs_.size());
    for (const auto& n : outputs_) v.push_back(n.get());
    return v;
  }
  [[nodiscard]] Node* output(std::size_t i = 0) const { return outputs_.at(i).get(); }
  [[nodiscard]] std::size_t output_count() const noexcept { return outputs_.size(); }

  /// Module calls and tensor methods (CallMethod), functional ops (CallFunction).
  [[nodiscard]] bool is_call() const noexcept {
    return kind_ == ExprKind::call_method || kind_ == ExprKind::call_function;
  }
  /// A call of a module (`conv1(x, )`), as opposed to a tensor method.
  [[nodiscard]] bool is_module_call() const noexcept { return kind_ == ExprKind::call_method && op_ == nullptr; }
  /// The op of a CallFunction or tensor-method CallMethod (from the op registry); null otherwise.
  [[nodiscard]] const functional::op_entry* op() const noexcept { return op_; }
  /// The printed target: "nn.relu", "__add__", "__call__" for module calls; the dotted attribute
  /// path of a GetAttr; the input name of an Input; the name of a Constant (usually empty).
  [[nodiscard]] const std::string& target() const noexcept { return target_; }
  /// GetAttr: the dotted attribute path, relative to its input module.
  [[nodiscard]] const std::string& name() const noexcept { return target_; }

  /// Positional arguments; for a CallMethod the first is the receiver (the tensor, or the module).
  [[nodiscard]] std::vector<CallArg> args() const;
  /// Keyword-only arguments, sorted by name.
  [[nodiscard]] std::vector<std::pair<std::string, CallArg>> kwargs() const;
  /// Every argument by parameter name, positional first (defaults filled in), then keyword-only.
  /// Module calls name their arguments by position ("0", "1", ...): C++ has no parameter names.
  [[nodiscard]] std::vector<std::pair<std::string, CallArg>> named_args() const;
  /// The constant (non-node) arguments with their positions in args() then kwargs().
  [[nodiscard]] std::vector<std::pair<std::size_t, Value>> const_val() const;
  /// How operand `i` of an op call is bound: a tensor input, a list of inputs (indices into
  /// inputs()), none, or a constant (a scalar for a well-formed call).
  struct Operand {
    functional::erased_operand::kind kind = functional::erased_operand::kind::none;
    std::span<const std::size_t> inputs{};
    const Value* constant = nullptr;  // none and scalar operands
  };
  [[nodiscard]] Operand operand(std::size_t i) const;
  /// An op call's params in canonical order: positional ones, then keyword-only ones (empty for
  /// other exprs).
  [[nodiscard]] std::vector<Value> params() const;

  /// Constant: the value (a tensor), or null module.
  [[nodiscard]] const Tensor& const_tensor() const noexcept { return const_tensor_; }
  [[nodiscard]] const Module* const_module() const noexcept { return const_module_.get(); }

  /// The module a module call calls; null for other exprs or when it cannot be resolved.
  [[nodiscard]] Module* callee() const;
  /// The callee sub-graph of a call of a user (traced) module for this call's arguments; null for
  /// builtin modules, tensor methods and functions.
  [[nodiscard]] Graph* graph() const;
  /// The signature that selects the callee's graph: argument kinds and constant values,
  /// e.g. "(Tensor, 1)".
  [[nodiscard]] const std::string& call_signature() const noexcept { return signature_; }

  /// The cost of a call (functional/cost.hpp) from its operands' recorded shapes: an op's from its
  /// definition, a user module's the sum over its callee graph, a builtin module's from its
  /// functional equivalent; zero for other exprs and for calls whose cost is not stated. graph/cost.hpp.
  [[nodiscard]] functional::op_cost cost() const;
  /// cost() for inputs of other shapes: `shape_of` gives the shape of each tensor node the call
  /// reads and of its output (shape inference for another input size, as tmod::summary does).
  [[nodiscard]] functional::op_cost cost(const std::function<Shape(const Node*)>& shape_of) const;
  /// The output shape of an op call or a builtin module call for inputs of the shapes `shape_of`
  /// gives (throws shape_error like the call would); graph_error for other exprs.
  [[nodiscard]] Shape infer_shape(const std::function<Shape(const Node*)>& shape_of) const;
  /// Arithmetic operations of the call, a multiply-add counting once (cost().flops).
  [[nodiscard]] std::int64_t flops() const { return cost().flops; }
  /// Multiply-accumulates of the call's contracting ops (conv, linear, matmul).
  [[nodiscard]] std::int64_t macs() const { return cost().macs; }
  /// Bytes the call reads and writes.
  [[nodiscard]] std::int64_t bytes() const { return cost().bytes(); }

  /// Runs this expr on values for its inputs (in inputs() order); returns one value per output.
  [[nodiscard]] std::vector<NodeValue> interpret(std::span<const NodeValue> inputs) const;

  /// Re-points the first use of `old_node` to `new_node` (same kind, same graph, produced before
  /// this expr); throws graph_error otherwise.
  void replace_inputs(Node* old_node, Node* new_node);

 private:
  friend class Graph;
  friend class ExecutionPlan;
  friend class IdAllocator;

  /// How an argument is rebuilt from inputs_ and constants.
  struct Slot {
    enum class Kind : std::uint8_t { node, node_list, constant } kind = Kind::constant;
    std::vector<std::size_t> inputs;  // indices into inputs_
    Value value;                      // kind == constant
  };

  Expr(ExprKind k, Graph* g) : kind_(k), graph_(g) {}

  CallArg materialize(const Slot& s) const;
  void add_input(Node* n);
  Node* add_output(std::unique_ptr<Node> n);
  /// The params of an op call, built from the constant slots (cached).
  const void* op_params() const;
  void invalidate_params() { params_.store(nullptr); }

  ExprKind kind_;
  Graph* graph_;
  std::int64_t id_ = -1;
  std::vector<Node*> inputs_;
  std::vector<std::unique_ptr<Node>> outputs_;
  const functional::op_entry* op_ = nullptr;
  std::string target_;
  std::vector<Slot> args_;
  std::vector<std::pair<std::string, Slot>> kwargs_;  // canonical (definition) order
  std::string signature_;
  Tensor const_tensor_;
  std::shared_ptr<const Module> const_module_;
  // Built on first use, possibly by concurrent runs: the first one stored is kept.
  mutable std::atomic<functional::erased_params> params_;
};

}  // namespace tracemod::graph
