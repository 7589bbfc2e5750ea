// tmod::summary(module_or_traced, specs...): torchinfo's table for a model, computed by shape
// inference over its graph (no kernel runs): one row per module call, named by its dotted path and
// indented by depth, with its output shape, its parameter count, its multiply-adds and FLOPs
// (functional/cost.hpp); then the totals and the memory the parameters and the activations take.
// A plain module is traced with the compile-time tracer first (tmod::symbolic_trace, then
// tmod::to_traced_module); a TracedModule is read as it is, its graph re-inferred for the specs.
#pragma once

#include <tracemod/functional/cost.hpp>
#include <tracemod/graph/cost.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/profile/format.hpp>
#include <tracemod/trace/spec.hpp>
#include <tracemod/trace/symbolic_trace.hpp>
#include <tracemod/traced_module/lower.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

namespace tracemod {

/// One module call of a summary.
struct summary_row {
  std::string name;  ///< dotted path from the top module: "layer1.0.conv1"
  std::string type;  ///< module type: "Conv2d", "BasicBlock"
  std::size_t depth = 0;
  Shape output;              ///< the call's (first) output shape
  std::int64_t params = 0;   ///< parameters of the called module, its sub-modules included
  functional::op_cost cost;  ///< of the call, its sub-calls included
};

/// What tmod::summary computes; table() renders it.
struct model_summary {
  std::string model;  ///< the top module's type
  std::vector<Shape> inputs;
  Shape output;
  std::vector<summary_row> rows;
  std::int64_t total_params = 0;
  functional::op_cost total;           ///< one forward
  std::int64_t param_bytes = 0;        ///< the parameters' storage
  std::int64_t input_bytes = 0;        ///< the inputs, float32
  std::int64_t activation_bytes = 0;   ///< every call's output, float32, as if all were kept

  /// The torchinfo-style text table.
  [[nodiscard]] std::string table() const {
    using profile_detail::grouped;
    using profile_detail::pad;
    const std::string rule(104, '=');
    std::string s = rule + "\n" + pad("Layer (type)", 44) + pad("Output Shape", 22, true) + pad("Param #", 14, true) +
                    pad("Mult-Adds", 16, true) + pad("FLOPs", 16, true) + "\n" + rule + "\n";
    s += pad(model, 44) + pad(output.to_string(), 22, true) + pad(grouped(total_params), 14, true) +
         pad(grouped(total.macs), 16, true) + pad(grouped(total.flops), 16, true) + "\n";
    for (const summary_row& r : rows)
      s += pad(std::string(2 * r.depth, ' ') + r.name + " (" + r.type + ")", 44) + pad(r.output.to_string(), 22, true) +
           pad(grouped(r.params), 14, true) + pad(grouped(r.cost.macs), 16, true) +
           pad(grouped(r.cost.flops), 16, true) + "\n";
    const auto mb = [](std::int64_t b) { return profile_detail::fixed(static_cast<double>(b) / 1e6, 2); };
    s += rule + "\n";
    s += "Total params: " + grouped(total_params) + "\n";
    s += "Total mult-adds (G): " + profile_detail::fixed(static_cast<double>(total.macs) / 1e9, 2) + "\n";
    s += "Total FLOPs (G): " + profile_detail::fixed(static_cast<double>(total.flops) / 1e9, 2) + "\n";
    s += rule + "\n";
    s += "Input size (MB): " + mb(input_bytes) + "\n";
    s += "Activations size (MB): " + mb(activation_bytes) + "\n";
    s += "Params size (MB): " + mb(param_bytes) + "\n";
    s += "Estimated total size (MB): " + mb(input_bytes + activation_bytes + param_bytes) + "\n";
    return s + rule + "\n";
  }

  friend std::ostream& operator<<(std::ostream& os, const model_summary& s) { return os << s.table(); }
};

namespace profile_detail {

inline std::int64_t parameter_count(const Module& m) {
  std::int64_t n = 0;
  for (const Parameter& p : m.parameters()) n += p.numel();
  return n;
}

/// Infers the shapes of one graph for its inputs' shapes, appending a row per module call.
class summary_walk {
 public:
  explicit summary_walk(model_summary& out) : out_(out) {}

  /// Walks `g` called with `inputs`; returns its cost and sets `outputs` to its output shapes.
  functional::op_cost walk(const graph::Graph& g, const std::vector<Shape>& inputs, const std::string& prefix,
                           std::size_t depth, std::vector<Shape>& outputs) {
    std::unordered_map<const graph::Node*, Shape> shapes;
    std::unordered_map<const graph::Node*, std::string> paths;
    const std::vector<graph::Node*> in = g.inputs();
    if (in.size() != inputs.size() + 1)
      throw graph_error("tmod::summary: " + g.name() + ".Graph takes " + std::to_string(in.size() - 1) +
                        " inputs, got " + std::to_string(inputs.size()) + " shapes");
    paths[in[0]] = prefix;
    for (std::size_t i = 0; i < inputs.size(); ++i) shapes[in[i + 1]] = inputs[i];
    const std::function<Shape(const graph::Node*)> shape_of = [&](const graph::Node* n) {
      const auto it = shapes.find(n);
      return it != shapes.end() ? it->second : graph::detail::recorded_shape(n);
    };
    functional::op_cost total;
    for (const auto& up : g.expr_list_()) {
      const graph::Expr& e = *up;
      if (e.kind() == graph::ExprKind::get_attr && !e.output()->is_tensor()) {
        const std::string& base = paths[e.inputs()[0]];
        paths[e.output()] = base.empty() ? e.name() : base + "." + e.name();
      }
      if (!e.is_call()) continue;
      if (!e.is_module_call()) {
        const Shape out = e.infer_shape(shape_of);
        shapes[e.output()] = out;
        out_.activation_bytes += functional::float_bytes(out);
        total += e.cost(shape_of);
        continue;
      }
      total += module_call(e, shape_of, paths[e.inputs()[0]], depth, shapes);
    }
    outputs.clear();
    for (const graph::Node* n : g.outputs()) outputs.push_back(shape_of(n));
    return total;
  }

 private:
  functional::op_cost module_call(const graph::Expr& e, const std::function<Shape(const graph::Node*)>& shape_of,
                                  const std::string& path, std::size_t depth,
                                  std::unordered_map<const graph::Node*, Shape>& shapes) {
    const auto* node = static_cast<const graph::ModuleNode*>(e.inputs()[0]);
    const Module* m = node->owner();
    const std::size_t row = out_.rows.size();
    out_.rows.push_back(summary_row{path, m ? std::string(m->type_name()) : node->module_type(), depth, {},
                                    m ? parameter_count(*m) : 0, {}});
    std::vector<Shape> args;
    for (std::size_t i = 1; i < e.inputs().size(); ++i) args.push_back(shape_of(e.inputs()[i]));
    std::vector<Shape> outs;
    functional::op_cost c;
    if (const graph::Graph* sub = e.graph()) {
      c = walk(*sub, args, path, depth + 1, outs);
    } else {
      outs.push_back(e.infer_shape(shape_of));
      out_.activation_bytes += functional::float_bytes(outs.back());
      c = e.cost(shape_of);
    }
    for (std::size_t i = 0; i < outs.size() && i < e.output_count(); ++i) shapes[e.output(i)] = outs[i];
    if (!outs.empty()) out_.rows[row].output = outs.front();
    out_.rows[row].cost = c;
    return c;
  }

  model_summary& out_;
};

}  // namespace profile_detail

/// The summary of a traced module called with inputs of these shapes.
inline model_summary summary(const TracedModule& traced, const std::vector<Shape>& inputs) {
  model_summary s;
  s.model = std::string(traced.type_name());
  s.inputs = inputs;
  for (const Shape& x : inputs) s.input_bytes += functional::float_bytes(x);
  for (const Parameter& p : traced.parameters()) {
    s.total_params += p.numel();
    s.param_bytes += static_cast<std::int64_t>(p.nbytes());
  }
  std::vector<Shape> outs;
  s.total = profile_detail::summary_walk(s).walk(traced.graph(), inputs, "", 0, outs);
  if (!outs.empty()) s.output = outs.front();
  return s;
}

/// The summary of a traced module for tmod::spec inputs.
template <class... S>
  requires(std::same_as<S, dynamic_spec> && ...)
model_summary summary(const TracedModule& traced, const S&... specs) {
  return summary(traced, std::vector<Shape>{specs.shape...});
}

/// The summary of a module: traced with the compile-time tracer for these specs, then summarised.
template <class M, class... S>
  requires(std::derived_from<M, Module> && !std::same_as<M, TracedModule>)
model_summary summary(const M& module, const S&... specs) {
  const TracedModule traced = to_traced_module(symbolic_trace(module, specs...));
  return summary(traced, std::vector<Shape>{Shape(specs.shape)...});
}

}  // namespace tracemod
