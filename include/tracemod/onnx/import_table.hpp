// The import mapping: every op states the ONNX node types it reads in its own definition
// (functional/onnx_rule.hpp: the attributes it understands, the inputs it needs at import time, and
// the calls it records); this file runs those rules over the protobuf node, beside the few node
// types that record no op (Identity, Dropout, Constant). The op registry is the table, so an op
// registered at run time with a rule imports like a builtin one. Anything else (an op, an attribute,
// a value of an attribute) is reported as unsupported. docs/onnx.md lists the mapping.
#pragma once

#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/onnx/importer.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tracemod::onnx::detail {

namespace F = functional;

struct import_rule {
  std::string op_type;
  std::vector<std::string> attributes;  ///< the attributes this rule reads (others are refused)
  std::vector<int> static_inputs;       ///< inputs read at import time (shapes, bounds)
  std::function<void(Importer&, const proto::NodeProto&)> convert;
};

using functional::ints_repr;

/// 2-D inputs only: ONNX's conv and pools also take 1-D and 3-D ones.
inline void require_2d(const proto::NodeProto& n, const Shape& x) {
  if (x.rank() != 4)
    throw unsupported(n.op_type() + " over " + std::to_string(static_cast<int>(x.rank()) - 2) +
                      " spatial axes (tracemod has the 2-D form only)");
}

/// The spatial geometry of a conv or pool: kernel, strides, dilations, and symmetric padding (from
/// pads or auto_pad); asymmetric padding is unsupported.
using window = functional::onnx_window;
inline window window_of(const proto::NodeProto& n, const Shape& x, std::vector<std::int64_t> kernel) {
  const auto pair = [&](const char* name, std::int64_t fallback) {
    const std::vector<std::int64_t> v = attr_ints(n, name, {fallback, fallback});
    if (v.size() != 2) throw unsupported("attribute " + std::string(name) + "=" + ints_repr(v) + " is not 2-D");
    if (v[0] <= 0 || v[1] <= 0) throw unsupported("attribute " + std::string(name) + "=" + ints_repr(v) + " is not positive");
    return F::pair2{v[0], v[1]};
  };
  window w{{kernel[0], kernel[1]}, pair("strides", 1), pair("dilations", 1), {0, 0}};
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<std::int64_t> p = attr_ints(n, "pads", {0, 0, 0, 0});
    if (p.size() != 4 || p[0] != p[2] || p[1] != p[3])
      throw unsupported("attribute pads=" + ints_repr(p) + " (asymmetric padding; tracemod pads both sides equally)");
    w.padding = {p[0], p[1]};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const auto same = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d) {
      const std::int64_t out = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
      if (total % 2 != 0)
        throw unsupported("attribute auto_pad=" + auto_pad + " pads one side more here (asymmetric padding)");
      return total / 2;
    };
    w.padding = {same(x[2], w.kernel.h, w.stride.h, w.dilation.h), same(x[3], w.kernel.w, w.stride.w, w.dilation.w)};
  } else if (auto_pad != "VALID") {
    throw unsupported("attribute auto_pad=" + auto_pad);
  }
  return w;
}

inline std::vector<std::int64_t> kernel_shape(const proto::NodeProto& n) {
  const std::vector<std::int64_t> k = attr_ints(n, "kernel_shape");
  if (k.size() != 2) throw unsupported("attribute kernel_shape=" + ints_repr(k) + " is not 2-D");
  return k;
}

inline void only_first_output(const proto::NodeProto& n, std::string_view what) {
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty()) throw unsupported("output " + std::to_string(i) + " (" + std::string(what) + ")");
}

/// The axes of Unsqueeze and Squeeze: input 1 from opset 13 on, the attribute `axes` before; an
/// empty optional when neither is given (Squeeze then drops every extent of 1).
inline std::optional<std::vector<std::int64_t>> axes_of(Importer& im, const proto::NodeProto& n) {
  if (im.opset() >= 13) {
    if (find_attr(n, "axes") != nullptr) throw unsupported("attribute axes (an input from opset 13 on)");
    if (n.input_size() < 2 || n.input(1).empty()) return std::nullopt;
    return im.integers(n, 1, "axes");
  }
  if (find_attr(n, "axes") == nullptr) return std::nullopt;
  return attr_ints(n, "axes");
}

inline void alias(Importer& im, const proto::NodeProto& n) { im.bind(n.output(0), im.tensor(n.input(0)), false); }

/// The rules' view of one node being imported.
class node_context final : public functional::onnx_import_context {
 public:
  node_context(Importer& im, const proto::NodeProto& n) : im_(im), n_(n) {}

  [[nodiscard]] const std::string& op_type() const override { return n_.op_type(); }
  [[nodiscard]] std::int64_t opset() const override { return im_.opset(); }
  [[nodiscard]] int input_count() const override { return n_.input_size(); }
  [[nodiscard]] bool has_input(int i) const override { return i < n_.input_size() && !n_.input(i).empty(); }
  functional::onnx_value tensor(int i) override {
    if (!has_input(i)) unsupported("input " + std::to_string(i) + " is missing");
    return {im_.tensor(n_.input(i))};
  }
  std::vector<double> numbers(int i, std::string_view what) override {
    if (!has_input(i)) unsupported("input " + std::to_string(i) + " (" + std::string(what) + ") is missing");
    return im_.numbers(n_, i, what);
  }
  std::vector<std::int64_t> integers(int i, std::string_view what) override {
    if (!has_input(i)) unsupported("input " + std::to_string(i) + " (" + std::string(what) + ") is missing");
    return im_.integers(n_, i, what);
  }
  [[nodiscard]] const Shape& shape(functional::onnx_value v) const override { return Importer::shape(node(v)); }
  [[nodiscard]] DType dtype(functional::onnx_value v) const override {
    return static_cast<const graph::TensorNode*>(node(v))->dtype();
  }
  [[nodiscard]] bool is_static(int i) const override { return has_input(i) && im_.is_static(n_.input(i)); }
  Shape static_shape(int i, std::string_view what) override {
    if (!has_input(i)) unsupported("input " + std::to_string(i) + " (" + std::string(what) + ") is missing");
    return im_.static_shape(n_, i, what);
  }

  [[nodiscard]] bool has_attr(std::string_view name) const override { return find_attr(n_, name) != nullptr; }
  [[nodiscard]] std::int64_t attr_int(std::string_view name, std::int64_t fallback) const override {
    return onnx::attr_int(n_, name, fallback);
  }
  [[nodiscard]] double attr_float(std::string_view name, float fallback) const override {
    return onnx::attr_float(n_, name, fallback);
  }
  [[nodiscard]] std::vector<std::int64_t> attr_ints(std::string_view name,
                                                    std::vector<std::int64_t> fallback) const override {
    return onnx::attr_ints(n_, name, std::move(fallback));
  }
  [[nodiscard]] std::string attr_string(std::string_view name, std::string fallback) const override {
    return onnx::attr_string(n_, name, std::move(fallback));
  }

  void require_2d(const Shape& x) const override { detail::require_2d(n_, x); }
  [[nodiscard]] std::vector<std::int64_t> kernel_shape() const override { return detail::kernel_shape(n_); }
  [[nodiscard]] functional::onnx_window window(const Shape& x, const std::vector<std::int64_t>& kernel) const override {
    return window_of(n_, x, kernel);
  }
  void only_first_output(std::string_view what) const override { detail::only_first_output(n_, what); }
  std::optional<std::vector<std::int64_t>> axes() override { return axes_of(im_, n_); }

  [[noreturn]] void unsupported(const std::string& why) const override { throw detail::unsupported(why); }

  functional::onnx_value call(std::string_view target, std::vector<functional::onnx_arg> operands,
                              std::vector<Value> params) override {
    std::vector<graph::CallArg> args;
    for (const functional::onnx_arg& a : operands) {
      if (const auto* v = std::get_if<functional::onnx_value>(&a)) {
        args.emplace_back(node(*v));
      } else if (const auto* l = std::get_if<std::vector<functional::onnx_value>>(&a)) {
        std::vector<graph::Node*> nodes;
        for (const functional::onnx_value& x : *l) nodes.push_back(node(x));
        args.emplace_back(std::move(nodes));
      } else {
        args.emplace_back(std::get<Value>(a));
      }
    }
    return {im_.call(functional::op_registry::instance().at(target), args, params)};
  }
  [[nodiscard]] int output_count() const override { return n_.output_size(); }
  void bind_output(int i, functional::onnx_value v, bool rename) override {
    if (i < n_.output_size()) im_.bind(n_.output(i), node(v), rename);
  }

 private:
  static graph::Node* node(functional::onnx_value v) { return static_cast<graph::Node*>(v.node); }

  Importer& im_;
  const proto::NodeProto& n_;
};

/// The node types that record no op: they alias or hold a value.
inline std::vector<import_rule> structural_rules() {
  return {
      {"Identity", {}, {},
       [](Importer& im, const proto::NodeProto& n) {
         // A computed static value stays one (a shape read later); an initializer stays one attribute.
         if (const proto::TensorProto* t = im.static_proto(n.input(0)); t != nullptr && !im.is_initializer(n.input(0)))
           im.add_static(n.output(0), *t, false);
         else
           alias(im, n);
       }},
      {"Constant", {"value"}, {},
       [](Importer& im, const proto::NodeProto& n) {
         const proto::AttributeProto* a = find_attr(n, "value");
         if (a == nullptr) throw unsupported("a Constant without attribute 'value'");
         im.add_static(n.output(0), a->t(), false);
       }},
      {"Dropout", {"ratio", "seed", "is_test"}, {1, 2},
       [](Importer& im, const proto::NodeProto& n) {
         // The mask (output 1, all true in inference) is left unbound: a node reading it is refused.
         // Training mode with ratio 0 (F.dropout(x, p=0.0) exports so) keeps every element too.
         const bool training = n.input_size() > 2 && !n.input(2).empty() && im.numbers(n, 2, "training_mode") != std::vector<double>{0};
         if (training && (n.input_size() < 2 || n.input(1).empty() || im.numbers(n, 1, "ratio") != std::vector<double>{0}))
           throw unsupported("training_mode=true with a nonzero ratio");
         alias(im, n);
       }},
  };
}

/// The rule for an ONNX op type (default domain): a structural one, else the first op of the
/// registry that reads it. Rules of ops registered since the last call join first; rules are never
/// removed, so the pointer stays valid.
[[nodiscard]] inline const import_rule* find_rule(std::string_view op_type) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<import_rule>> rules;
  static std::size_t ops_seen = 0;
  const std::lock_guard lock(mutex);
  if (rules.empty())
    for (import_rule& r : structural_rules()) rules.push_back(std::make_unique<import_rule>(std::move(r)));
  const std::vector<const functional::op_entry*> ops = functional::op_registry::instance().entries();
  for (; ops_seen < ops.size(); ++ops_seen)
    for (const functional::onnx_import_rule& r : ops[ops_seen]->onnx_imports)
      rules.push_back(std::make_unique<import_rule>(import_rule{
          r.op_type, r.attributes, r.static_inputs, [convert = r.convert](Importer& im, const proto::NodeProto& n) {
            node_context cx(im, n);
            convert(cx);
          }}));
  for (const auto& r : rules)
    if (r->op_type == op_type) return r.get();
  return nullptr;
}

}  // namespace tracemod::onnx::detail
