// The op registry: every functional op, type-erased, found by the target a graph prints
// ("nn.relu", "__add__", "tensor.reshape"). Each entry is generated from the op's definition
// (operands, fields, infer_shape, eager, kernel and facts), so no op is written twice. An op joins
// by registering beside its definition (TRACEMOD_REGISTER_OP in its header, or register_op<Op>()
// for a user's op); user functions made builtin with tmod::wrap join the same table. The runtime
// graph's recorder, interpreter, printer and serializer reach ops only through it. This header
// includes every builtin op's header, so each of them is registered wherever the registry is used.
#pragma once

#include <tracemod/core/value.hpp>
#include <tracemod/functional/cost.hpp>
#include <tracemod/functional/fused_program.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/param_value.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::functional {

/// An operand of a type-erased call: a tensor, a number (for tensor_or_scalar), None (for optional
/// tensors) or a list of tensors (tensor_list). Pointers refer to the caller's values.
struct erased_operand {
  enum class kind : std::uint8_t { tensor, scalar, none, list };
  kind k = kind::none;
  const Tensor* tensor = nullptr;
  double scalar = 0.0;
  std::span<const Tensor> list{};
};

/// The shape of an operand of a type-erased shape inference (a scalar is rank 0).
struct erased_shape {
  erased_operand::kind k = erased_operand::kind::none;
  Shape shape{};
  std::span<const Shape> list{};
  const ShapeValue* value = nullptr;  ///< a tensor operand's value, where it is known (core/dim.hpp)
};

/// An operand of a type-erased symbolic shape inference: its dims and example shape (rank 0 for a
/// scalar), or one per tensor of a list.
struct erased_dims {
  erased_operand::kind k = erased_operand::kind::none;
  ShapeDims one{};
  std::vector<ShapeDims> list{};
  /// An integer operand as a rank-0 shape value (`one.value` points to it), so that the arithmetic
  /// ops carry it into their results' values.
  std::shared_ptr<const ShapeValue> number{};
};

/// A non-tensor parameter as the registry describes it.
struct param_spec {
  std::string name;
  bool keyword_only = false;
  Value default_value;
};

/// The params of one call, in the op's own params type, behind a type-erased pointer.
using erased_params = std::shared_ptr<const void>;

/// One op, type-erased.
struct op_entry {
  std::string name;    ///< auto-naming base: relu -> relu_out
  std::string target;  ///< what a graph prints: nn.relu, __add__, tensor.flatten
  call_kind kind = call_kind::function;
  std::vector<operand> operands;
  std::vector<param_spec> params;  ///< canonical order: positional, then keyword-only
  bool elementwise = false;        ///< one output element per input element (fusable)
  arith_kind arith = arith_kind::none;     ///< add/sub/mul/div/neg, from the op's kernel
  bool reflected = false;                  ///< a reflected method: other OP self (__rsub__)
  bool in_place = false;                   ///< an in-place method: x.__iadd__(y) keeps x's shape
  scale_rule scaling = scale_rule::none;   ///< how the op commutes with scaling (op.hpp)
  bool foldable = false;                   ///< constant folding may run it ahead of time (pure)
  /// The fused function of an elementwise op's kernel (its index in fused_functions), if it has one:
  /// FuseElemwise fuses the op.
  std::optional<std::size_t> fused_function;
  /// What a graph prints as the callee instead of the target, from the params (null: the target);
  /// an op with it prints only its operands as arguments (elemwise.fused[relu(x0 + 1)](inputs, )).
  std::function<std::string(const void* params)> callee_text;
  /// Builds the params object from values in canonical order; throws value_error naming the op.
  std::function<erased_params(std::span<const Value>)> make_params;
  /// Runs the eager kernel.
  std::function<Tensor(const void* params, std::span<const erased_operand>)> call;
  /// The output shape (throws shape_error like the eager call would).
  std::function<Shape(const void* params, std::span<const erased_shape>)> infer_shape;
  /// The symbolic output shape of a call on operands some of whose dims are symbolic (core/dim.hpp):
  /// Op::infer_dims, else, for an elementwise op, its operands broadcast; throws shape_error for an
  /// op that describes neither. Called after infer_shape accepted the example shapes.
  std::function<Dims(const void* params, std::span<const erased_dims>)> infer_dims;
  /// The value of the output, for an op that computes shapes as values (Op::infer_value); null for
  /// the others, whose outputs' values are not known before a run.
  std::function<std::optional<ShapeValue>(const void* params, std::span<const erased_dims>)> infer_value;
  /// The cost of a call (functional/cost.hpp) from its operand shapes and its output shape.
  std::function<op_cost(const void* params, std::span<const erased_shape>, const Shape& out)> cost;
  /// The output dtype given the params (null when they are not known yet) and the operands' dtypes:
  /// Op::infer_dtype(const params*, dtypes) where the op states it (astype), else its input's dtype
  /// for an op that takes any dtype (`any_dtype`), else float32.
  std::function<DType(const void* params, std::span<const DType>)> infer_dtype;
  /// Its ONNX export rule (onnx_rule.hpp); null for an op without an ONNX equivalent.
  std::function<void(onnx_export_context&, const void* params)> onnx_export;
  /// The ONNX node types it imports (onnx_rule.hpp).
  std::vector<onnx_import_rule> onnx_imports;

  /// Number of positional params.
  [[nodiscard]] std::size_t positional_param_count() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(params.begin(), params.end(), [](const param_spec& p) { return !p.keyword_only; }));
  }
};

namespace detail {

template <class Op>
concept keeps_input_dtype = requires { requires Op::any_dtype; };

/// Throws value_error "<target>: expected <expected> <what>, got <got>" for a type-erased call given
/// the wrong number of operands or params (one function, not one copy per op and entry).
[[noreturn]] inline void wrong_count(std::string_view target, std::size_t expected, std::string_view what,
                                     std::size_t got) {
  throw value_error(std::string(target) + ": expected " + std::to_string(expected) + " " + std::string(what) +
                    ", got " + std::to_string(got));
}

[[noreturn]] inline void bad_operand(std::string_view op, std::string_view operand, std::string_view expected) {
  throw value_error(std::string(op) + ": operand '" + std::string(operand) + "' must be " + std::string(expected));
}

/// Calls Op::eager with each erased operand turned into the C++ type its kind asks for.
template <class Op, std::size_t K, class... Done>
Tensor erased_eager(const typename Op::params& p, std::span<const erased_operand> ops, const Done&... done) {
  if constexpr (K == Op::operands.size()) {
    if constexpr ((scalar_operand<Done> && ...))
      throw value_error(std::string(Op::target) + ": needs at least one tensor operand");
    else
      return Op::eager(p, done...);
  } else {
    constexpr operand_kind kind = Op::operands[K].kind;
    constexpr std::string_view name = Op::operands[K].name;
    const erased_operand& o = ops[K];
    using k = erased_operand::kind;
    if constexpr (kind == operand_kind::tensor_list) {
      if (o.k != k::list) bad_operand(Op::target, name, "a list of tensors");
      return erased_eager<Op, K + 1>(p, ops, done..., std::vector<Tensor>(o.list.begin(), o.list.end()));
    } else {
      if (o.k == k::tensor) return erased_eager<Op, K + 1>(p, ops, done..., *o.tensor);
      if constexpr (kind == operand_kind::optional_tensor) {
        if (o.k == k::none) return erased_eager<Op, K + 1>(p, ops, done..., none);
        bad_operand(Op::target, name, "a tensor or None");
      } else if constexpr (kind == operand_kind::tensor_or_scalar) {
        if (o.k == k::scalar) return erased_eager<Op, K + 1>(p, ops, done..., static_cast<float>(o.scalar));
        bad_operand(Op::target, name, "a tensor or a number");
      } else {
        bad_operand(Op::target, name, "a tensor");
      }
    }
  }
}

/// The bytes a call moves when it reads each tensor operand and writes its output once.
inline op_cost io_bytes(std::span<const erased_shape> shapes, const Shape& out) {
  op_cost c;
  for (const erased_shape& s : shapes) {
    if (s.k == erased_operand::kind::tensor) c.bytes_read += float_bytes(s.shape);
    if (s.k == erased_operand::kind::list)
      for (const Shape& x : s.list) c.bytes_read += float_bytes(x);
  }
  c.bytes_written = float_bytes(out);
  return c;
}

/// The value of shape-value operand `name` of Op; throws shape_error when it is not known.
template <class Op>
const ShapeValue& known_value(const ShapeValue* v, std::string_view name, const Shape& shape) {
  if (v == nullptr)
    throw shape_error(std::string(Op::target) + ": operand '" + std::string(name) + "' " + shape.to_string() +
                      " must be an int32 value computed from shapes (F::shape_of, F::size, getitem, stack, "
                      "tensor_from_list) or a constant, so that the result's shape is known when recorded");
  return *v;
}

/// Erased shape K in the form Op::infer_shape takes for its operand kind.
template <class Op, std::size_t K>
decltype(auto) shape_arg(std::span<const erased_shape> shapes) {
  using k = erased_operand::kind;
  constexpr operand_kind kind = Op::operands[K].kind;
  const erased_shape& s = shapes[K];
  if constexpr (kind == operand_kind::shape_value) {
    if (s.k != k::tensor) bad_operand(Op::target, Op::operands[K].name, "a tensor");
    return known_value<Op>(s.value, Op::operands[K].name, s.shape);
  } else if constexpr (kind == operand_kind::tensor_list) {
    if (s.k != k::list) bad_operand(Op::target, Op::operands[K].name, "a list of tensors");
    return s.list;
  } else if constexpr (kind == operand_kind::optional_tensor) {
    if (s.k == k::scalar || s.k == k::list) bad_operand(Op::target, Op::operands[K].name, "a tensor or None");
    return s.k == k::none ? static_cast<const Shape*>(nullptr) : &s.shape;
  } else {
    if (s.k == k::none || s.k == k::list || (s.k == k::scalar && kind != operand_kind::tensor_or_scalar))
      bad_operand(Op::target, Op::operands[K].name, kind == operand_kind::tensor ? "a tensor" : "a tensor or a number");
    return static_cast<const Shape&>(s.shape);
  }
}

/// Calls Op::infer_shape with each erased shape in the form its operand kind asks for.
template <class Op, std::size_t... I>
Shape erased_infer(const typename Op::params& p, std::span<const erased_shape> shapes, std::index_sequence<I...>) {
  return Op::infer_shape(p, shape_arg<Op, I>(shapes)...);
}

/// Erased dims K in the form Op::infer_dims takes for its operand kind (infer_shape checked the kinds).
template <class Op, std::size_t K>
decltype(auto) dims_arg(std::span<const erased_dims> ops) {
  constexpr operand_kind kind = Op::operands[K].kind;
  const erased_dims& d = ops[K];
  if constexpr (kind == operand_kind::shape_value)
    return known_value<Op>(d.one.value, Op::operands[K].name, d.one.shape);
  else if constexpr (kind == operand_kind::tensor_list)
    return std::span<const ShapeDims>(d.list);
  else if constexpr (kind == operand_kind::optional_tensor)
    return d.k == erased_operand::kind::none ? static_cast<const ShapeDims*>(nullptr) : &d.one;
  else
    return static_cast<const ShapeDims&>(d.one);
}

/// The symbolic output shape: Op::infer_dims, or the broadcast of an elementwise op's operands (an
/// in-place method keeps its receiver's).
template <class Op, std::size_t... I>
Dims erased_infer_dims(const typename Op::params& p, std::span<const erased_dims> ops, std::index_sequence<I...>) {
  if constexpr (requires { Op::infer_dims(p, dims_arg<Op, I>(ops)...); }) {
    return Op::infer_dims(p, dims_arg<Op, I>(ops)...);
  } else if constexpr (requires { typename Op::kernel_op; } || requires { requires Op::elementwise; }) {
    if (in_place_of<Op>()) return ops[0].one.dims;
    Dims out;
    Shape example;
    const auto join = [&](const ShapeDims& x) {
      out = broadcast_dims(out, example, x.dims, x.shape, Op::target);
      example = broadcast_shapes(example, x.shape, Op::target);
    };
    for (const erased_dims& d : ops) {
      if (d.k == erased_operand::kind::tensor) join(d.one);
      for (const ShapeDims& x : d.list) join(x);
    }
    return out;
  } else {
    throw shape_error(std::string(Op::target) +
                      " has no symbolic shape inference (infer_dims), so it cannot take a tensor with dynamic "
                      "dimensions; trace with static shapes");
  }
}

/// The cost of a call: the op's own arithmetic (Op::cost), else one operation per output element
/// of an elementwise op; bytes are the tensor operands read and the output written unless the op
/// states them.
template <class Op, std::size_t... I>
op_cost erased_cost(const typename Op::params& p, std::span<const erased_shape> shapes, const Shape& out,
                    std::index_sequence<I...>) {
  op_cost c;
  if constexpr (requires { Op::cost(p, out, shape_arg<Op, I>(shapes)...); })
    c = Op::cost(p, out, shape_arg<Op, I>(shapes)...);
  else if constexpr (requires { typename Op::kernel_op; } || requires { requires Op::elementwise; })
    c = flop_cost(out.numel());
  if (c.bytes_read == 0 && c.bytes_written == 0) c += io_bytes(shapes, out);
  return c;
}

template <class Op>
op_entry make_entry() {
  using P = typename Op::params;
  op_entry e;
  e.name = std::string(Op::name);
  e.target = std::string(Op::target);
  e.kind = Op::kind;
  e.operands.assign(Op::operands.begin(), Op::operands.end());
  for_each_param<Op>(P{}, [&](std::string_view name, const auto& value, bool keyword_only) {
    e.params.push_back(param_spec{std::string(name), keyword_only, to_value(value)});
  });
  e.elementwise = requires { typename Op::kernel_op; } || requires { requires Op::elementwise; };
  if constexpr (requires { Op::arith; }) e.arith = Op::arith;
  if constexpr (requires { Op::reflected; }) e.reflected = Op::reflected;
  e.in_place = in_place_of<Op>();
  e.scaling = scaling_of<Op>();
  e.foldable = foldable_of<Op>();
  if constexpr (fusable_op<Op>) e.fused_function = fused_functions::instance().add<Op>();
  if constexpr (requires(const P& p) { Op::callee(p); })
    e.callee_text = +[](const void* params) { return Op::callee(*static_cast<const P*>(params)); };
  e.make_params = +[](std::span<const Value> values) -> erased_params {
    constexpr std::size_t n = param_count_v<Op>;
    if (values.size() != n) wrong_count(Op::target, n, "parameters", values.size());
    auto p = std::make_shared<P>();
    std::size_t i = 0;
    std::apply(
        [&](const auto&... fl) {
          ((p.get()->*(fl.member) = from_value<std::remove_cvref_t<decltype(p.get()->*(fl.member))>>(
                values[i++], Op::target, fl.name)),
           ...);
        },
        Op::fields);
    return p;
  };
  e.call = +[](const void* params, std::span<const erased_operand> ops) -> Tensor {
    if (ops.size() != Op::operands.size()) wrong_count(Op::target, Op::operands.size(), "operands", ops.size());
    return erased_eager<Op, 0>(*static_cast<const P*>(params), ops);
  };
  e.infer_shape = +[](const void* params, std::span<const erased_shape> shapes) -> Shape {
    if (shapes.size() != Op::operands.size()) wrong_count(Op::target, Op::operands.size(), "operands", shapes.size());
    return erased_infer<Op>(*static_cast<const P*>(params), shapes, std::make_index_sequence<Op::operands.size()>{});
  };
  e.infer_dims = +[](const void* params, std::span<const erased_dims> ops) -> Dims {
    if (ops.size() != Op::operands.size()) wrong_count(Op::target, Op::operands.size(), "operands", ops.size());
    return erased_infer_dims<Op>(*static_cast<const P*>(params), ops, std::make_index_sequence<Op::operands.size()>{});
  };
  e.cost = +[](const void* params, std::span<const erased_shape> shapes, const Shape& out) -> op_cost {
    if (shapes.size() != Op::operands.size()) wrong_count(Op::target, Op::operands.size(), "operands", shapes.size());
    return erased_cost<Op>(*static_cast<const P*>(params), shapes, out, std::make_index_sequence<Op::operands.size()>{});
  };
  if constexpr (requires { &Op::infer_value; })
    e.infer_value = +[](const void* params, std::span<const erased_dims> ops) -> std::optional<ShapeValue> {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return Op::infer_value(*static_cast<const P*>(params), dims_arg<Op, I>(ops)...);
      }(std::make_index_sequence<Op::operands.size()>{});
    };
  if constexpr (requires(onnx_export_context& cx, const P& p) { Op::onnx_export(cx, p); })
    e.onnx_export = +[](onnx_export_context& cx, const void* p) { Op::onnx_export(cx, *static_cast<const P*>(p)); };
  if constexpr (requires { Op::onnx_imports(); })
    e.onnx_imports = Op::onnx_imports();
  else if constexpr (requires { Op::onnx_import_types; })
    e.onnx_imports = onnx_import_rules<Op>();
  e.infer_dtype = +[](const void* params, std::span<const DType> dtypes) {
    (void)params;
    if constexpr (requires(const P* p) { { Op::infer_dtype(p, dtypes) } -> std::same_as<DType>; })
      return Op::infer_dtype(static_cast<const P*>(params), dtypes);
    else if constexpr (keeps_input_dtype<Op>)
      return dtypes.empty() ? DType::float32 : dtypes.front();
    else
      return DType::float32;
  };
  return e;
}

}  // namespace detail

/// Every registered op, found by printed target. Thread-safe; entries are never removed, so references
/// stay valid for the program's life.
class op_registry {
 public:
  static op_registry& instance() {
    static op_registry* r = new op_registry;  // never destroyed: entries outlive every static graph
    return *r;
  }

  /// The entry for a target, or nullptr.
  [[nodiscard]] const op_entry* find(std::string_view target) const {
    const std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
      if (e->target == target) return e.get();
    return nullptr;
  }
  /// The entry for a target; throws value_error listing the known targets.
  [[nodiscard]] const op_entry& at(std::string_view target) const {
    if (const op_entry* e = find(target)) return *e;
    throw value_error("unknown op '" + std::string(target) + "' (known: " + known() + ")");
  }
  /// Adds an entry (register_op, tmod::wrap); throws value_error if the target is taken.
  const op_entry& add(op_entry e) {
    const std::lock_guard lock(mutex_);
    for (const auto& x : entries_)
      if (x->target == e.target) throw value_error("op '" + e.target + "' is already registered");
    entries_.push_back(std::make_unique<op_entry>(std::move(e)));
    return *entries_.back();
  }
  /// "nn.relu, __add__, ...".
  [[nodiscard]] std::string known() const {
    const std::lock_guard lock(mutex_);
    std::string s;
    for (const auto& e : entries_) s += (s.empty() ? "" : ", ") + e->target;
    return s;
  }
  [[nodiscard]] std::vector<const op_entry*> entries() const {
    const std::lock_guard lock(mutex_);
    std::vector<const op_entry*> v;
    for (const auto& e : entries_) v.push_back(e.get());
    return v;
  }

 private:
  op_registry() = default;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<op_entry>> entries_;
};

template <class Op>
const op_entry& register_op() {
  static_assert(op_definition<Op>, "tracemod: register_op needs an op definition (name, target, kind, operands, "
                                   "params, fields; see functional/op.hpp)");
  // Checked first, so that a refused op adds no fused function either.
  if (op_registry::instance().find(Op::target) != nullptr)
    throw value_error("op '" + std::string(Op::target) + "' is already registered");
  return op_registry::instance().add(detail::make_entry<Op>());
}

/// The cost of a call of Op with `params` on operands of these shapes (a Shape per tensor operand,
/// a `const Shape*` per optional one, null for None): what builtin modules state their cost with.
template <class Op, class... S>
op_cost cost_of(const typename Op::params& p, const S&... shapes) {
  const auto erase = [](const auto& s) {
    if constexpr (std::is_pointer_v<std::remove_cvref_t<decltype(s)>>)
      return s == nullptr ? erased_shape{} : erased_shape{erased_operand::kind::tensor, *s, {}};
    else
      return erased_shape{erased_operand::kind::tensor, s, {}};
  };
  const std::array<erased_shape, sizeof...(S)> erased{erase(shapes)...};
  const Shape out = detail::erased_infer<Op>(p, erased, std::make_index_sequence<sizeof...(S)>{});
  return detail::erased_cost<Op>(p, erased, out, std::make_index_sequence<sizeof...(S)>{});
}

/// The registry entry of op type Op (looked up once).
template <class Op>
const op_entry& entry_of() {
  static const op_entry& e = op_registry::instance().at(Op::target);
  return e;
}
template <class Op>
const op_entry& entry_of(const Op&) {
  return entry_of<Op>();
}

/// The registry entry of a call of Op with `params`: Op::entry(params) for ops whose entry is only
/// known at run time (tmod::wrap's functions carry theirs in their params), else entry_of<Op>().
template <class Op, class P>
const op_entry& entry_of_call(const P& params) {
  if constexpr (requires { { Op::entry(params) } -> std::convertible_to<const op_entry&>; })
    return Op::entry(params);
  else
    return entry_of<Op>();
}

}  // namespace tracemod::functional

// Every builtin op header registers its ops; including them here makes the registry complete
// wherever it is used. Last: those headers include this one for register_op.
#include <tracemod/functional.hpp>
