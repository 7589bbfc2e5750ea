// Import-time evaluation of the values exporters compute from shapes and constants. torch.onnx
// writes `x.view(x.size(0), 2, -1)` as Shape -> Gather -> Unsqueeze -> Concat -> Reshape, and
// `t.expand(n, -1, -1)` or a mask built from shapes with ConstantOfShape, Equal, Where, Range. When
// every input of such a node is known at import time (an initializer, a Constant, a value folded
// before), or, for Shape and Size, its input's extents are static, import computes the node's value
// on the host (host_tensor.hpp) instead of recording a call. Later nodes read it as they read a
// Constant: as numbers (a Reshape's target) or, as a tensor operand, through a Constant expr.
// Node types outside fold_rules() take the import table's path, and so does a Shape or Size of an
// input with dynamic dims: its op records it, reading the extents at run time and keeping the dims
// as the value's expressions.
#pragma once

#include <tracemod/onnx/fold_rules.hpp>
#include <tracemod/onnx/importer.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tracemod::onnx::detail {

/// Folds node `n` when it is of a type fold_rules() computes and every input is known: its output
/// becomes a static value of `im`. Returns false (nothing done) otherwise. Errors in the values
/// (out-of-range indices, shapes that do not broadcast) are value_errors, which import reports.
inline bool fold(Importer& im, const proto::NodeProto& n) {
  if (n.output_size() != 1 || !(n.domain().empty() || n.domain() == "ai.onnx")) return false;
  const fold_rule* rule = find_fold_rule(n.op_type());
  if (rule == nullptr) return false;
  for (const proto::AttributeProto& a : n.attribute())
    if (std::find(rule->attributes.begin(), rule->attributes.end(), a.name()) == rule->attributes.end()) return false;
  if ((n.op_type() == "Shape" || n.op_type() == "Size") && n.input_size() == 1 && !im.is_static(n.input(0))) {
    const graph::TensorNode* t = im.bound_tensor(n.input(0));
    if (t == nullptr) return false;
    if (!::tracemod::is_static(t->dims())) return false;
    im.add_folded(n.output(0), proto_of(fold_shape(n, {t->shape().begin(), t->shape().end()}, im.opset()), n.output(0)));
    return true;
  }
  fold_node f{n, {}, {}, im.opset()};
  for (const std::string& in : n.input()) {
    const proto::TensorProto* t = in.empty() ? nullptr : im.static_proto(in);
    if (!in.empty() && t == nullptr) return false;
    f.present.push_back(t != nullptr);
    f.in.push_back(t != nullptr ? host_of(*t, "input '" + in + "'") : host_tensor{});
  }
  im.add_folded(n.output(0), proto_of(rule->fold(f), n.output(0)));
  return true;
}

}  // namespace tracemod::onnx::detail
