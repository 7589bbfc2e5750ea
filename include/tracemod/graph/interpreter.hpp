// The interpreter: how a graph runs (beside graph.hpp's what). The first run of a graph compiles an
// execution plan: one step per expr with its op resolved and its params built once, a value slot per
// node, and for every slot the step after which nobody reads it, so each value is freed right after
// its last use. Any change to the graph drops the plan. Values reach ops as pointers into the slots:
// running a plan allocates nothing but the op results.
//
// A module-call step runs the callee's forward hooks around the call, as an eager call does.
//
// Runs are reentrant: the plan is built once under the graph's lock (concurrent first runs wait for
// it) and is read-only afterwards; the slots and byte counts of a run belong to that call.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/nn/run_hooks.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tracemod::graph {

/// Observers of one run of a top graph: values of watched nodes are reported as they are computed;
/// the run stops as soon as every end node has a value.
struct RunHooks {
  std::vector<const Node*> watch;
  std::function<void(const Node*, const NodeValue&)> on_watch;
  std::vector<const Node*> end;
  std::vector<NodeValue>* end_values = nullptr;  // filled in `end` order
};

namespace detail {

[[noreturn]] inline void fail_at(const Expr& e, const std::string& why) {
  throw graph_error("%" + std::to_string(e.id()) + " (" + e.target() + "): " + why);
}

/// Runs a call of a module: a traced module runs the graph for the call's signature, a builtin one
/// its forward. Returns one value per output of `e`.
inline std::vector<NodeValue> call_module_body(const Expr& e, const Module* m, std::span<const NodeValue> args) {
  std::vector<NodeValue> out;
  if (const auto* holder = dynamic_cast<const GraphHolder*>(m)) {
    const Graph* sub = holder->graph_for(e.call_signature());
    if (sub == nullptr)
      fail_at(e, "module '" + e.inputs()[0]->name() + "' has no graph for the call signature " + e.call_signature());
    out = sub->run(*m, args);
  } else {
    std::vector<Tensor> tensors;
    tensors.reserve(args.size());
    for (const NodeValue& a : args) {
      const Value* v = std::get_if<Value>(&a);
      if (v == nullptr || !v->is_tensor()) fail_at(e, "a builtin module takes tensors only");
      tensors.push_back(v->tensor());
    }
    out.emplace_back(Value(m->call_erased(tensors)));
  }
  if (out.size() != e.output_count())
    fail_at(e, "the callee returned " + std::to_string(out.size()) + " values for " + std::to_string(e.output_count()) +
                   " outputs");
  return out;
}

/// The leaves of `v`, which must have the structure of `tree` (a forward hook's replacement output
/// has the structure of the output it replaces).
inline bool flatten_like(const NodeTree& tree, const Value& v, std::vector<NodeValue>& out) {
  if (tree.kind == NodeTree::Kind::leaf) {
    out.emplace_back(v);
    return true;
  }
  const bool same_kind = tree.kind == NodeTree::Kind::dict ? v.kind() == Value::Kind::dict : v.is_sequence();
  if (!same_kind || v.size() != tree.children.size()) return false;
  for (std::size_t i = 0; i < tree.children.size(); ++i) {
    if (tree.kind == NodeTree::Kind::dict && v.dict_items()[i].first != tree.keys[i]) return false;
    const Value& child = tree.kind == NodeTree::Kind::dict ? v.dict_items()[i].second : v[i];
    if (!flatten_like(tree.children[i], child, out)) return false;
  }
  return true;
}

/// A module call with the callee's live hooks around it, as an eager call runs them: the pre-hooks
/// see (and may replace) the arguments, the forward hooks the nested output.
inline std::vector<NodeValue> call_module_hooked(const Expr& e, const Module& m, const tracemod::detail::hook_list& hooks,
                                                 std::span<const NodeValue> args) {
  ValueList inputs;
  inputs.reserve(args.size());
  for (const NodeValue& a : args) {
    const Value* v = std::get_if<Value>(&a);
    if (v == nullptr) fail_at(e, "a module passed as an argument cannot be shown to the callee's hooks");
    inputs.push_back(*v);
  }
  const std::string where = "%" + std::to_string(e.id()) + " (" + e.inputs()[0]->name() + "): ";
  const auto named = [&](auto&& run_hooks) {  // a hook's error also names the call's expr
    try {
      run_hooks();
    } catch (const error& x) {
      tracemod::detail::rethrow_with_prefix(x, where);
    }
  };
  std::vector<NodeValue> replaced;
  bool pre_replaced = false;
  named([&] { pre_replaced = tracemod::detail::run_pre_hooks(m, hooks, inputs); });
  if (pre_replaced) {
    if (inputs.size() != args.size())
      throw value_error(where + "the forward pre-hooks of " + std::string(m.type_name()) + " returned " +
                        std::to_string(inputs.size()) + " inputs for " + std::to_string(args.size()) + " arguments");
    replaced.assign(inputs.begin(), inputs.end());
    args = replaced;
  }
  std::vector<NodeValue> out = call_module_body(e, &m, args);
  if (!tracemod::detail::hook_list::any_live(hooks.post)) return out;
  const auto* holder = dynamic_cast<const GraphHolder*>(&m);
  const Graph* sub = holder != nullptr ? holder->graph_for(e.call_signature()) : nullptr;
  Value output = sub != nullptr ? sub->pack_outputs(out) : std::get<Value>(out.front());
  named([&] { tracemod::detail::run_forward_hooks(m, hooks, inputs, output); });
  std::vector<NodeValue> flat;
  const bool fits = sub != nullptr ? flatten_like(sub->output_tree(), output, flat) : output.is_tensor();
  if (!fits)
    throw value_error(where + "the forward hooks of " + std::string(m.type_name()) + " replaced the output by " +
                      output.repr() + ", which has another structure than the output of the call");
  if (sub == nullptr) flat.emplace_back(std::move(output));
  return flat;
}

/// Runs a call of a module with its hooks (graph/interpreter's module-call steps and Expr::interpret).
inline std::vector<NodeValue> call_module(const Expr& e, const Module* m, std::span<const NodeValue> args) {
  if (m == nullptr) fail_at(e, "the called module is missing");
  using tracemod::detail::module_access;
  if (const auto* hooks = module_access::hooks(*m); hooks != nullptr && tracemod::detail::any_live_hook(*hooks)) [[unlikely]]
    return call_module_hooked(e, *m, *hooks, args);
  return call_module_body(e, m, args);
}

}  // namespace detail

class ExecutionPlan {
 public:
  explicit ExecutionPlan(const Graph& g) : graph_(g) {
    std::unordered_map<const Node*, std::uint32_t> slot_of;
    slot_of.reserve(g.inputs_.size() + 2 * g.exprs_.size());
    steps_.reserve(g.exprs_.size());
    const auto slot = [&](const Node* n) {
      const auto [it, fresh] = slot_of.emplace(n, static_cast<std::uint32_t>(slot_of.size()));
      return it->second;
    };
    for (const auto& in : g.inputs_) {
      inputs_.push_back(slot(in->output()));
      const auto* t = in->output()->is_tensor() ? static_cast<const TensorNode*>(in->output()) : nullptr;
      input_dims_.push_back(t != nullptr && t->is_dynamic() ? t->dims() : Dims{});
    }
    for (const auto& up : g.exprs_) {
      const Expr& e = *up;
      Step s;
      s.expr = &e;
      s.kind = e.kind();
      for (const Node* n : e.inputs()) s.in.push_back(slot(n));
      for (std::size_t i = 0; i < e.output_count(); ++i) s.out.push_back(slot(e.output(i)));
      if (e.op() != nullptr) {
        s.op = e.op();
        s.params = e.op_params();
        for (std::size_t i = 0; i < s.op->operands.size(); ++i) {
          const Expr::Operand b = e.operand(i);
          Operand o;
          o.kind = b.kind;
          if (b.kind == functional::erased_operand::kind::tensor) o.slot = s.in[b.inputs.front()];
          if (b.kind == functional::erased_operand::kind::list)
            for (std::size_t j : b.inputs) o.list.push_back(s.in[j]);
          if (b.kind == functional::erased_operand::kind::scalar) o.scalar = b.constant->number();
          s.operands.push_back(std::move(o));
        }
      }
      steps_.push_back(std::move(s));
    }
    for (const Node* n : g.outputs()) {
      const auto it = slot_of.find(n);
      if (it == slot_of.end())
        throw graph_error(g.name() + ".Graph: output node '" + n->name() + "' is produced by no expr of the graph");
      outputs_.push_back(it->second);
    }
    slot_count_ = slot_of.size();
    nodes_.resize(slot_count_);
    for (const auto& [n, i] : slot_of) nodes_[i] = n;
    // Last reader of every slot; graph outputs are never freed.
    std::vector<std::int64_t> last(slot_count_, -1);
    for (std::size_t i = 0; i < steps_.size(); ++i)
      for (std::uint32_t x : steps_[i].in) last[x] = static_cast<std::int64_t>(i);
    for (std::uint32_t x : outputs_) last[x] = static_cast<std::int64_t>(steps_.size());
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      for (std::uint32_t x : steps_[i].in)
        if (last[x] == static_cast<std::int64_t>(i) && std::find(steps_[i].free.begin(), steps_[i].free.end(), x) == steps_[i].free.end())
          steps_[i].free.push_back(x);
      for (std::uint32_t x : steps_[i].out)
        if (last[x] == -1) steps_[i].free.push_back(x);  // an unused result dies at once
    }
  }

  std::vector<NodeValue> run(const Module& self, std::span<const NodeValue> inputs, const RunHooks* hooks) const {
    if (inputs.size() + 1 != inputs_.size())
      throw graph_error(graph_.name() + ".Graph takes " + std::to_string(inputs_.size() - 1) + " input" +
                        (inputs_.size() == 2 ? "" : "s") + ", got " + std::to_string(inputs.size()));
    run_state r(slot_count_);
    r.values[inputs_[0]] = &self;
    DimBinding binding;  // the symbols' extents in this call (dynamic graphs)
    std::vector<std::pair<std::size_t, std::size_t>> deferred;  // (input, axis) of compound dims
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      check_input(i + 1, inputs[i], binding, deferred);
      r.values[inputs_[i + 1]] = inputs[i];
    }
    for (const auto& [i, axis] : deferred) check_compound_dim(i, axis, inputs[i - 1], binding);
    std::vector<bool> end_done;
    std::size_t end_left = 0;
    if (hooks != nullptr && !hooks->end.empty()) {
      end_done.assign(hooks->end.size(), false);
      end_left = hooks->end.size();
      for (std::size_t i = 0; i < inputs_.size(); ++i) mark_end(*hooks, inputs_[i], r.values, end_done, end_left);
      if (end_left == 0) return finish(r, {});
    }
    for (const Step& s : steps_) {
      execute(s, r);
      if (hooks != nullptr) {
        for (std::uint32_t o : s.out) {
          if (!hooks->watch.empty() && hooks->on_watch &&
              std::find(hooks->watch.begin(), hooks->watch.end(), nodes_[o]) != hooks->watch.end())
            hooks->on_watch(nodes_[o], r.values[o]);
          if (end_left != 0) mark_end(*hooks, o, r.values, end_done, end_left);
        }
        if (!hooks->end.empty() && end_left == 0) return finish(r, {});
      }
      for (std::uint32_t x : s.free) release(r, x);
    }
    std::vector<NodeValue> out;
    out.reserve(outputs_.size());
    for (std::uint32_t x : outputs_) out.push_back(r.values[x]);
    return finish(r, std::move(out));
  }

  /// The most bytes of tensors held by this plan's slots at once during the run that finished last
  /// (inputs and module attributes excluded).
  [[nodiscard]] std::size_t peak_live_bytes() const noexcept {
    return last_peak_bytes_.load(std::memory_order_relaxed);
  }

 private:
  struct Operand {
    functional::erased_operand::kind kind{};
    std::uint32_t slot = 0;
    double scalar = 0.0;
    std::vector<std::uint32_t> list;
  };
  struct Step {
    const Expr* expr = nullptr;
    ExprKind kind{};
    std::vector<std::uint32_t> in, out, free;
    const functional::op_entry* op = nullptr;
    const void* params = nullptr;
    std::vector<Operand> operands;
  };

  static const Tensor& tensor_of(const NodeValue& v, const Step& s) {
    if (const Value* x = std::get_if<Value>(&v); x != nullptr && x->is_tensor()) return x->tensor();
    throw graph_error("%" + std::to_string(s.expr->id()) + " " + s.expr->target() + ": an operand is not a tensor");
  }

  /// Checks input i against its node: its dtype, and its shape against the traced one or, for a
  /// dynamic input, its dims: constants equal, each symbol one extent across all inputs (bound in
  /// `binding`); compound dims are checked once every input bound its symbols (`deferred`).
  void check_input(std::size_t i, const NodeValue& v, DimBinding& binding,
                   std::vector<std::pair<std::size_t, std::size_t>>& deferred) const {
    const Node* n = nodes_[inputs_[i]];
    const auto* x = std::get_if<Value>(&v);
    if (!n->is_tensor()) return;
    const auto* tn = static_cast<const TensorNode*>(n);
    if (x == nullptr || !x->is_tensor() || !x->tensor().defined())
      throw value_error(graph_.name() + ".Graph: input '" + n->name() + "' must be a defined tensor");
    const Tensor& t = x->tensor();
    if (!input_dims_[i].empty() && t.dtype() == tn->dtype()) {
      check_dims(i, t, binding, deferred);
      return;
    }
    if (t.shape() != tn->shape() || t.dtype() != tn->dtype())
      throw shape_error(graph_.name() + ".Graph: input '" + n->name() + "' has shape " + t.shape().to_string() + " " +
                        std::string(dtype_name(t.dtype())) + ", but the graph was traced with " +
                        tn->shape().to_string() + " " + std::string(dtype_name(tn->dtype())));
  }

  [[noreturn]] void nonconforming(std::size_t i, const Shape& given, const std::string& why) const {
    const auto* tn = static_cast<const TensorNode*>(nodes_[inputs_[i]]);
    throw shape_error(graph_.name() + ".Graph: input '" + tn->name() + "' has shape " + given.to_string() +
                      ", which does not conform to " + to_string(input_dims_[i]) + ": " + why);
  }

  void check_dims(std::size_t i, const Tensor& t, DimBinding& binding,
                  std::vector<std::pair<std::size_t, std::size_t>>& deferred) const {
    const Dims& d = input_dims_[i];
    const Shape& s = t.shape();
    if (s.rank() != d.size())
      nonconforming(i, s, "rank " + std::to_string(s.rank()) + " instead of " + std::to_string(d.size()));
    for (std::size_t a = 0; a < d.size(); ++a) {
      const std::string axis = "axis " + std::to_string(a) + " is " + std::to_string(s[a]);
      if (d[a].is_constant()) {
        if (s[a] != d[a].value()) nonconforming(i, s, axis + ", not " + std::to_string(d[a].value()));
      } else if (d[a].is_symbol()) {
        const auto [it, fresh] = binding.emplace(d[a].name(), s[a]);
        if (!fresh && it->second != s[a])
          nonconforming(i, s, axis + ", but '" + d[a].name() + "' is " + std::to_string(it->second) +
                                  " in this call (inputs sharing a symbol must agree)");
      } else {
        deferred.emplace_back(i, a);
      }
    }
  }

  /// A compound dim whose symbols the inputs bound must equal its value; one with a symbol no
  /// input binds is left to the kernels (the ops check their operands).
  void check_compound_dim(std::size_t i, std::size_t axis, const NodeValue& v, const DimBinding& binding) const {
    const DimExpr& e = input_dims_[i][axis];
    std::vector<std::string> names;
    e.symbols(names);
    for (const std::string& n : names)
      if (binding.find(n) == binding.end()) return;
    const Shape& s = std::get<Value>(v).tensor().shape();
    const std::int64_t want = e.evaluate(binding);
    if (s[axis] != want)
      nonconforming(i, s, "axis " + std::to_string(axis) + " is " + std::to_string(s[axis]) + ", but " + e.to_string() +
                              " is " + std::to_string(want) + " in this call");
  }

  void mark_end(const RunHooks& h, std::uint32_t slot, const std::vector<NodeValue>& values, std::vector<bool>& done,
                std::size_t& left) const {
    for (std::size_t k = 0; k < h.end.size(); ++k)
      if (!done[k] && h.end[k] == nodes_[slot]) {
        done[k] = true;
        --left;
        if (h.end_values != nullptr) {
          h.end_values->resize(h.end.size());
          (*h.end_values)[k] = values[slot];
        }
      }
  }

  /// What one run owns: its value slots and the bytes of tensors they hold.
  struct run_state {
    explicit run_state(std::size_t slots) : values(slots), counted(slots, 0) {}
    std::vector<NodeValue> values;
    std::vector<std::size_t> counted;  // bytes of each slot's tensor that store() counted
    std::size_t live_bytes = 0, peak_bytes = 0;
  };

  /// Publishes a finished run's peak (the last run to finish sets it) and returns its outputs.
  std::vector<NodeValue> finish(const run_state& r, std::vector<NodeValue> out) const {
    last_peak_bytes_.store(r.peak_bytes, std::memory_order_relaxed);
    return out;
  }

  /// Stores an op's result in slot `i`, counting its bytes as live.
  static void store(run_state& r, std::uint32_t i, Tensor t) {
    const std::size_t bytes = t.defined() ? t.nbytes() : 0;
    r.counted[i] = bytes;
    r.live_bytes += bytes;
    r.peak_bytes = std::max(r.peak_bytes, r.live_bytes);
    r.values[i] = Value(std::move(t));
  }
  /// Drops slot `i` (a result counted by store, or a value the caller passed in).
  static void release(run_state& r, std::uint32_t i) {
    r.live_bytes -= r.counted[i];
    r.counted[i] = 0;
    r.values[i].emplace<Value>();  // in place: assigning a temporary trips g++ 12's -Wmaybe-uninitialized
  }

  void execute(const Step& s, run_state& r) const {
    std::vector<NodeValue>& values = r.values;
    switch (s.kind) {
      case ExprKind::call_function:
      case ExprKind::call_method:
        if (s.op != nullptr) {
          run_op(s, r);
          return;
        }
        run_module_call(s, r);
        return;
      case ExprKind::get_attr: {
        const Module* base = std::get<const Module*>(values[s.in[0]]);  // the recorder only builds module bases
        const ConstAttrRef ref = base->getattr(s.expr->name());
        if (ref.is_module())
          values[s.out[0]] = &ref.module();
        else
          values[s.out[0]] = Value(ref.tensor());
        return;
      }
      case ExprKind::constant:
        if (s.expr->const_module() != nullptr)
          values[s.out[0]] = s.expr->const_module();
        else
          values[s.out[0]] = Value(s.expr->const_tensor());
        return;
      case ExprKind::input: return;
    }
  }

  void run_op(const Step& s, run_state& r) const {
    const std::vector<NodeValue>& values = r.values;
    constexpr std::size_t inline_operands = 6;
    functional::erased_operand ops[inline_operands];
    std::vector<Tensor> list_storage;
    const std::size_t n = s.operands.size();
    if (n > inline_operands) throw graph_error(s.op->target + ": too many operands");
    for (std::size_t i = 0; i < n; ++i) {
      const Operand& o = s.operands[i];
      ops[i].k = o.kind;
      switch (o.kind) {
        case functional::erased_operand::kind::tensor: ops[i].tensor = &tensor_of(values[o.slot], s); break;
        case functional::erased_operand::kind::scalar: ops[i].scalar = o.scalar; break;
        case functional::erased_operand::kind::none: break;
        case functional::erased_operand::kind::list:
          list_storage.clear();
          for (std::uint32_t x : o.list) list_storage.push_back(tensor_of(values[x], s));
          ops[i].list = list_storage;
          break;
      }
    }
    store(r, s.out[0], s.op->call(s.params, std::span<const functional::erased_operand>(ops, n)));
  }

  void run_module_call(const Step& s, run_state& r) const {
    std::vector<NodeValue>& values = r.values;
    std::vector<NodeValue> args;
    args.reserve(s.in.size() - 1);
    for (std::size_t i = 1; i < s.in.size(); ++i) args.push_back(values[s.in[i]]);
    std::vector<NodeValue> out = detail::call_module(*s.expr, std::get<const Module*>(values[s.in[0]]), args);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const Value* v = std::get_if<Value>(&out[i]);
      if (v != nullptr && v->is_tensor())
        store(r, s.out[i], v->tensor());
      else
        values[s.out[i]] = std::move(out[i]);
    }
  }

  const Graph& graph_;
  std::vector<std::uint32_t> inputs_, outputs_;
  std::vector<Dims> input_dims_;  // per input: its dims if dynamic, else empty
  std::vector<Step> steps_;
  std::vector<const Node*> nodes_;
  std::size_t slot_count_ = 0;
  mutable std::atomic<std::size_t> last_peak_bytes_{0};
};

inline std::shared_ptr<const ExecutionPlan> Graph::plan() const {
  const std::lock_guard lock(plan_mutex_);
  if (!plan_) {
    plan_ = std::make_shared<const ExecutionPlan>(*this);
    plans_built_.fetch_add(1, std::memory_order_relaxed);
  }
  return plan_;
}

inline std::vector<NodeValue> Graph::run(const Module& self, std::span<const NodeValue> inputs,
                                         const RunHooks* hooks) const {
  const std::shared_ptr<const ExecutionPlan> p = plan();  // a hook may edit the graph; keep the plan alive
  return p->run(self, inputs, hooks);
}

inline std::size_t Graph::peak_live_bytes() const noexcept {
  const std::lock_guard lock(plan_mutex_);
  return plan_ ? plan_->peak_live_bytes() : 0;
}

inline std::vector<NodeValue> Expr::interpret(std::span<const NodeValue> in) const {
  if (in.size() != inputs_.size())
    detail::fail_at(*this, "interpret takes " + std::to_string(inputs_.size()) + " values, got " + std::to_string(in.size()));
  const auto tensor_at = [&](std::size_t i) -> const Tensor& {
    const Value* v = std::get_if<Value>(&in[i]);
    if (v == nullptr || !v->is_tensor()) detail::fail_at(*this, "input " + std::to_string(i) + " is not a tensor");
    return v->tensor();
  };
  switch (kind_) {
    case ExprKind::input: detail::fail_at(*this, "an Input expr computes nothing: its value is the graph's input");
    case ExprKind::constant:
      if (const_module_) return {NodeValue(const_module_.get())};
      return {NodeValue(Value(const_tensor_))};
    case ExprKind::get_attr: {
      const auto* base = std::get_if<const Module*>(&in[0]);
      if (base == nullptr || *base == nullptr) detail::fail_at(*this, "the base of a getattr must be a module");
      const ConstAttrRef ref = (*base)->getattr(target_);
      if (ref.is_module()) return {NodeValue(&ref.module())};
      return {NodeValue(Value(ref.tensor()))};
    }
    case ExprKind::call_function:
    case ExprKind::call_method: break;
  }
  if (op_ == nullptr) {
    const auto* m = std::get_if<const Module*>(&in[0]);
    if (m == nullptr) detail::fail_at(*this, "the receiver of a module call must be a module");
    return detail::call_module(*this, *m, in.subspan(1));
  }
  std::vector<functional::erased_operand> ops(op_->operands.size());
  std::vector<std::vector<Tensor>> lists(op_->operands.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Operand b = operand(i);
    ops[i].k = b.kind;
    if (b.kind == functional::erased_operand::kind::tensor) ops[i].tensor = &tensor_at(b.inputs.front());
    if (b.kind == functional::erased_operand::kind::list) {
      for (std::size_t j : b.inputs) lists[i].push_back(tensor_at(j));
      ops[i].list = lists[i];
    }
    if (b.kind == functional::erased_operand::kind::scalar) ops[i].scalar = b.constant->number();
  }
  return {NodeValue(Value(op_->call(op_params(), ops)))};
}

}  // namespace tracemod::graph

// Expr::cost is defined beside the other graph queries that need the whole graph.
#include <tracemod/graph/cost.hpp>
