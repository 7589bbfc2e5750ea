// The export mapping: every op and every builtin module states its ONNX nodes in its own definition
// (functional/onnx_rule.hpp); this file runs those rules over the protobuf graph. The op registry
// and the builtin-module registry are the tables, so an op or module registered at run time with a
// rule exports like a builtin one. docs/onnx.md lists the mapping.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/onnx/emitter.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace tracemod::onnx::detail {

/// The rules' view of the ONNX graph under construction.
class emitter_builder final : public functional::onnx_graph_builder {
 public:
  explicit emitter_builder(Emitter& e) : e_(e) {}

  [[nodiscard]] bool dynamic_batch() const override { return e_.options().dynamic_batch; }
  [[nodiscard]] std::int64_t opset() const override { return e_.options().opset; }
  [[nodiscard]] std::string fresh(std::string_view base) override { return e_.fresh(base); }
  void node(const std::string& op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<functional::onnx_attribute>& attributes) override {
    proto::NodeProto& n = e_.node(op_type, inputs, outputs);
    for (const functional::onnx_attribute& a : attributes)
      std::visit([&](const auto& v) { set_attr(n, a.name, v); }, a.value);
  }
  std::string initializer(const Tensor& t, std::string_view base) override { return e_.initializer(t, base); }
  std::string weight(const Tensor& t, const std::string& path) override { return e_.weight(t, path); }
  std::string scalar(double v) override { return e_.scalar(v); }
  std::string filled(double v, std::int64_t n) override { return e_.filled(v, n); }
  std::string ints(const std::vector<std::int64_t>& v, std::string_view base) override { return e_.ints(v, base); }
  std::string zero_point(std::int64_t v, bool is_unsigned) override { return e_.zero_point(v, is_unsigned); }

  /// The first function op of the registry whose kernel is that instruction and that has a rule.
  void export_instruction(std::size_t function, functional::onnx_export_context& cx) override {
    for (const functional::op_entry* op : functional::op_registry::instance().entries())
      if (op->kind == functional::call_kind::function && op->fused_function == function && op->onnx_export) {
        const functional::erased_params p = op->make_params({});
        op->onnx_export(cx, p.get());
        return;
      }
    cx.refuse("fused function '" + functional::fused_functions::instance().at(function).name +
              "' is run by no op with an ONNX rule");
  }

 private:
  Emitter& e_;
};

/// Whether calls of this op can be exported.
[[nodiscard]] inline bool has_rule(const functional::op_entry& op) { return static_cast<bool>(op.onnx_export); }

/// The builtin-module registry's rule for a module type, or null.
[[nodiscard]] inline const nn::builtin_entry* module_rule(std::string_view type_name) {
  const nn::builtin_entry* e = nn::builtin_registry::instance().find(type_name);
  return e != nullptr && e->onnx_export ? e : nullptr;
}

/// Emits the nodes of one op call; `params` points to the op's params struct.
inline void export_op(Emitter& e, const functional::op_entry& op, const void* params, const Call& c) {
  emitter_builder builder(e);
  functional::onnx_export_context cx(builder, c);
  op.onnx_export(cx, params);
}

/// Emits the nodes of one call of a builtin module whose attribute path is `path`.
inline void export_module(Emitter& e, const Module& m, const std::string& path, const Call& c) {
  emitter_builder builder(e);
  functional::onnx_export_context cx(builder, c);
  module_rule(m.type_name())->onnx_export(cx, m, path);
}

}  // namespace tracemod::onnx::detail
