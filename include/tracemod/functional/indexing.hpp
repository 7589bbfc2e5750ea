// Indexing and slicing: F::getitem(x, tmod::all, tmod::slice(1, 3)) is Python's x[:, 1:3], recorded
// as MegEngine records it: `getitem_out = x.__getitem__((slice(None, None, None), slice(1, 3, None)), )`.
// An index is a list of items: an integer picks one position and drops its axis (negative counts from
// the end), a tmod::slice keeps the axis (Python's start, stop and step, each optional), and one
// tmod::ellipsis stands for every axis the other items leave out. The result is a copy.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/functional/param_value.hpp>
#include <tracemod/functional/shape_ops.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace tracemod {

/// A slice of one axis, Python's start:stop:step; an absent bound (tmod::none) is Python's default.
/// Spelled with two or three arguments (tmod::slice(1, 3), tmod::slice(tmod::none, tmod::none, 2)):
/// Python's one-argument slice(3) means :3 and PyTorch's Slice(3) means 3:, so neither is offered.
struct slice {
  std::optional<std::int64_t> start, stop, step;

  constexpr slice() = default;
  template <class A, class B, class C = none_t>
  constexpr slice(A a, B b, C c = none) : start(bound(a)), stop(bound(b)), step(bound(c)) {}
  friend constexpr bool operator==(const slice&, const slice&) = default;

 private:
  template <class T>
  static constexpr std::optional<std::int64_t> bound(T v) {
    static_assert(std::same_as<T, none_t> || std::same_as<T, std::nullopt_t> ||
                      (std::integral<T> && !std::same_as<T, bool>),
                  "tmod::slice: each bound is an integer or tmod::none");
    if constexpr (std::integral<T>)
      return static_cast<std::int64_t>(v);
    else
      return std::nullopt;
  }
};

/// Python's `:`, a whole axis.
inline constexpr slice all{};

/// Python's `...`: the axes the other items of an index leave out.
struct ellipsis_t {
  friend constexpr bool operator==(ellipsis_t, ellipsis_t) noexcept { return true; }
};
inline constexpr ellipsis_t ellipsis{};

}  // namespace tracemod

namespace tracemod::functional {

/// One item of an index: an integer, a slice or the ellipsis.
using index_item = std::variant<std::int64_t, slice, ellipsis_t>;

/// The index of a getitem call; prints as Python's repr of it (what MegEngine's graphs show).
struct index_spec {
  std::vector<index_item> items;
  friend bool operator==(const index_spec&, const index_spec&) = default;
};

namespace detail {

inline std::string optional_repr(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "None"; }

inline std::string item_repr(const index_item& it) {
  if (const auto* i = std::get_if<std::int64_t>(&it)) return std::to_string(*i);
  if (const auto* s = std::get_if<slice>(&it))
    return "slice(" + optional_repr(s->start) + ", " + optional_repr(s->stop) + ", " + optional_repr(s->step) + ")";
  return "Ellipsis";
}

/// Reads the text index_repr writes; value_error naming the op otherwise.
class index_parser {
 public:
  index_parser(std::string_view text, std::string_view op) : text_(text), op_(op) {}

  index_spec parse() {
    index_spec spec;
    skip();
    if (eat("(")) {  // a tuple: items separated by commas, maybe a trailing one
      while (!eat(")")) {
        spec.items.push_back(item());
        if (!eat(",") && !peek(")")) fail("',' or ')'");
      }
    } else {
      spec.items.push_back(item());
    }
    if (pos_ != text_.size()) fail("the end");
    return spec;
  }

 private:
  index_item item() {
    if (eat("Ellipsis")) return ellipsis;
    if (eat("slice(")) {
      slice s;
      s.start = bound();
      if (!eat(",")) fail("','");
      s.stop = bound();
      if (!eat(",")) fail("','");
      s.step = bound();
      if (!eat(")")) fail("')'");
      return s;
    }
    return integer();
  }
  std::optional<std::int64_t> bound() {
    if (eat("None")) return std::nullopt;
    return integer();
  }
  std::int64_t integer() {
    const bool negative = eat("-");
    if (pos_ == text_.size() || text_[pos_] < '0' || text_[pos_] > '9') fail("an integer");
    std::uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[pos_++] - '0');
      if (v > (std::uint64_t{1} << 63) / 10 || v * 10 + digit > (std::uint64_t{1} << 63)) fail("an integer in int64");
      v = v * 10 + digit;
    }
    skip();
    if (!negative && v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) fail("an integer in int64");
    return negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  }
  void skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool peek(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  bool eat(std::string_view s) {
    if (!peek(s)) return false;
    pos_ += s.size();
    skip();
    return true;
  }
  [[noreturn]] void fail(std::string_view expected) const {
    throw value_error(std::string(op_) + ": index '" + std::string(text_) + "' does not parse: expected " +
                      std::string(expected) + " at character " + std::to_string(pos_));
  }

  std::string_view text_;
  std::string_view op_;
  std::size_t pos_ = 0;
};

}  // namespace detail

/// Python's repr of the index: one item alone, several as a tuple.
inline std::string repr(const index_spec& v) {
  if (v.items.size() == 1) return detail::item_repr(v.items[0]);
  std::string s = "(";
  for (std::size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + detail::item_repr(v.items[i]);
  return s + ")";
}
inline Value to_value(const index_spec& v) { return Value(repr(v)); }

namespace detail {

template <>
struct param_from_value<index_spec> {
  static index_spec get(const Value& v, std::string_view op, std::string_view name) {
    if (v.kind() != Value::Kind::string) bad_param(op, name, "an index such as (slice(1, 3, None), 0)", v);
    return index_parser(v.string(), op).parse();
  }
};

/// What an index does to one input axis: keep it as `count` positions start, start + step, ...
/// (a slice), or take position `start` and drop it (an integer).
struct axis_plan {
  std::int64_t start = 0, step = 1, count = 0;
  bool kept = true;
};

/// Python's rule for a slice of an axis of `n` positions (CPython's PySlice_AdjustIndices): bounds
/// clamp to the axis, so any bounds are valid; the step must not be 0.
inline axis_plan slice_plan(const slice& s, std::int64_t n, std::string_view op, const Shape& x, std::size_t axis) {
  const std::int64_t step = s.step.value_or(1);
  if (step == 0 || step == std::numeric_limits<std::int64_t>::min())
    throw value_error(std::string(op) + ": slice step " + std::to_string(step) + " for axis " + std::to_string(axis) +
                      " of shape " + x.to_string() + " (it must be nonzero and above -2^63)");
  const auto clamp = [&](std::optional<std::int64_t> b, std::int64_t fallback) {
    if (!b) return fallback;
    std::int64_t v = *b;
    if (v < 0) {
      v = v < -n ? -1 : v + n;  // v + n without overflow
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  const std::int64_t start = clamp(s.start, step < 0 ? n - 1 : 0);
  const std::int64_t stop = clamp(s.stop, step < 0 ? -1 : n);
  std::int64_t count = 0;
  if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
  return {start, step, count, true};
}

/// The plan of every input axis for `index` on shape x; shape_error or value_error naming the op.
inline std::vector<axis_plan> index_plan(const index_spec& index, const Shape& x, std::string_view op) {
  std::size_t ellipses = 0, used = 0;
  for (const index_item& it : index.items) {
    if (std::holds_alternative<ellipsis_t>(it))
      ++ellipses;
    else
      ++used;
  }
  if (ellipses > 1) throw value_error(std::string(op) + ": index " + repr(index) + " has more than one Ellipsis");
  if (used > x.rank())
    throw shape_error(std::string(op) + ": too many indices: " + repr(index) + " indexes " + std::to_string(used) +
                      " axes of a tensor of shape " + x.to_string());
  std::vector<axis_plan> plan;
  const auto whole = [&](std::size_t axis) { plan.push_back({0, 1, x[axis], true}); };
  for (const index_item& it : index.items) {
    const std::size_t axis = plan.size();
    if (std::holds_alternative<ellipsis_t>(it)) {
      for (std::size_t k = 0; k < x.rank() - used; ++k) whole(plan.size());
    } else if (const auto* s = std::get_if<slice>(&it)) {
      plan.push_back(slice_plan(*s, x[axis], op, x, axis));
    } else {
      const std::int64_t i = std::get<std::int64_t>(it);
      const std::int64_t n = x[axis];
      if (i >= n || i < -n)
        throw shape_error(std::string(op) + ": index " + std::to_string(i) + " is out of range for axis " +
                          std::to_string(axis) + " (extent " + std::to_string(n) + ") of shape " + x.to_string() +
                          " in " + repr(index));
      plan.push_back({i < 0 ? i + n : i, 1, 1, false});
    }
  }
  while (plan.size() < x.rank()) whole(plan.size());
  return plan;
}

/// The index's item for each axis of a tensor of `rank` axes: the ellipsis and the axes after the
/// last item become tmod::all. The index must be valid for that rank (index_plan checks it).
inline std::vector<index_item> expand_index(const index_spec& index, std::size_t rank) {
  std::size_t used = 0;
  for (const index_item& it : index.items) used += std::holds_alternative<ellipsis_t>(it) ? 0 : 1;
  std::vector<index_item> out;
  for (const index_item& it : index.items) {
    if (std::holds_alternative<ellipsis_t>(it))
      out.insert(out.end(), rank - used, all);
    else
      out.push_back(it);
  }
  out.resize(rank, all);
  return out;
}

/// Copies the positions the plan selects from x (contiguous, row-major) into y, element type T.
template <class T>
void gather_plan(const std::vector<axis_plan>& plan, const Shape& x, const T* in, T* out) {
  const std::size_t rank = plan.size();
  std::vector<std::int64_t> stride(rank, 1);
  for (std::size_t a = rank; a-- > 1;) stride[a - 1] = stride[a] * x[a];
  std::int64_t base = 0;
  for (std::size_t a = 0; a < rank; ++a) base += plan[a].start * stride[a];
  if (rank == 0) {
    *out = *in;
    return;
  }
  for (const axis_plan& p : plan)
    if (p.count == 0) return;
  // Odometer over every axis but the last; the last runs as one row (a copy when its step is 1).
  const axis_plan& last = plan[rank - 1];
  std::vector<std::int64_t> pos(rank, 0);
  std::int64_t offset = base;
  for (;;) {
    if (last.step == 1) {
      std::memcpy(out, in + offset, static_cast<std::size_t>(last.count) * sizeof(T));
    } else {
      for (std::int64_t j = 0; j < last.count; ++j) out[j] = in[offset + j * last.step];
    }
    out += last.count;
    std::size_t a = rank - 1;
    for (;;) {
      if (a == 0) return;
      --a;
      if (++pos[a] < plan[a].count) {
        offset += plan[a].step * stride[a];
        break;
      }
      offset -= (plan[a].count - 1) * plan[a].step * stride[a];
      pos[a] = 0;
    }
  }
}

}  // namespace detail

struct getitem_params {
  index_spec index;
  friend bool operator==(const getitem_params&, const getitem_params&) = default;
};

/// What getitem takes as an index item.
template <class T>
concept index_argument = std::same_as<T, slice> || std::same_as<T, ellipsis_t> ||
                         (std::integral<T> && !std::same_as<T, bool>);

/// self[index]: F::getitem(x, tmod::all, 0) is x[:, 0], F::getitem(x, tmod::ellipsis, tmod::slice(1, -1))
/// is x[..., 1:-1], F::getitem(x, -1) is x[-1]. A copy, in any dtype.
struct getitem_fn : op_base<getitem_fn> {
  static constexpr std::string_view name = "__getitem__";
  static constexpr std::string_view target = "__getitem__";
  static constexpr call_kind kind = call_kind::method;
  static constexpr bool any_dtype = true;
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr std::array operands{operand{"self", operand_kind::tensor}};
  using params = getitem_params;
  static constexpr std::tuple fields{required("index", &params::index)};

  static Shape infer_shape(const params& p, const Shape& x) {
    Shape out;
    for (const detail::axis_plan& a : detail::index_plan(p.index, x, target))
      if (a.kept) out.push_back(a.count);
    return out;
  }

  /// The symbolic shape (core/dim.hpp): a symbolic axis taken whole (`:`, `...`) keeps its
  /// expression, `k:` (k >= 0, step 1) becomes `extent - k`, an integer drops the axis (the kernel
  /// checks the position at run time). Any other slice of a symbolic axis depends on a min or max of
  /// the extent, which no DimExpr states: it needs a static extent.
  static Dims infer_dims(const params& p, const ShapeDims& x) {
    const std::vector<detail::axis_plan> plan = detail::index_plan(p.index, x.shape, target);
    const std::vector<index_item> items = detail::expand_index(p.index, x.dims.size());
    Dims out;
    for (std::size_t axis = 0; axis < plan.size(); ++axis) {
      if (!plan[axis].kept) continue;
      const DimExpr& d = x.dims[axis];
      if (d.is_constant()) {
        out.push_back(plan[axis].count);
        continue;
      }
      const slice& s = std::get<slice>(items[axis]);
      if (s.step.value_or(1) != 1 || s.stop || s.start.value_or(0) < 0)
        throw shape_error(std::string(target) + ": index " + repr(p.index) + " slices axis " + std::to_string(axis) +
                          " of " + to_string(x.dims) + " with bounds that need a static extent (only ':' and 'k:' " +
                          "with k >= 0 follow a symbolic one)");
      out.push_back(d - DimExpr(s.start.value_or(0)));
    }
    return out;
  }

  /// Of a shape value (core/dim.hpp), the elements the index picks.
  static std::optional<ShapeValue> infer_value(const params& p, const ShapeDims& x) {
    if (x.value == nullptr || x.shape.rank() != 1) return std::nullopt;
    const std::vector<detail::axis_plan> plan = detail::index_plan(p.index, x.shape, target);
    std::vector<std::int64_t> position(static_cast<std::size_t>(x.shape[0]));
    for (std::size_t i = 0; i < position.size(); ++i) position[i] = static_cast<std::int64_t>(i);
    std::vector<std::int64_t> picked(plan[0].count);
    detail::gather_plan(plan, x.shape, position.data(), picked.data());
    ShapeValue v;
    for (std::int64_t i : picked) {
      v.dims.push_back(x.value->dims[static_cast<std::size_t>(i)]);
      v.example.push_back(x.value->example[static_cast<std::size_t>(i)]);
    }
    return v;
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "self", x);
    const std::vector<detail::axis_plan> plan = detail::index_plan(p.index, x.shape(), target);
    Shape out;
    for (const detail::axis_plan& a : plan)
      if (a.kept) out.push_back(a.count);
    Tensor y = Tensor::empty(out, x.dtype(), target);
    visit_dtype(x.dtype(), [&]<class T>(T) { detail::gather_plan(plan, x.shape(), x.data<T>(), y.data<T>()); });
    return y;
  }

  /// The call forms: x and the index's items, or x and an index_spec (or the params struct).
  using op_base::operator();
  template <class X, index_argument... I>
    requires(sizeof...(I) > 0)
  decltype(auto) operator()(const X& x, const I&... items) const {
    params p;
    (p.index.items.push_back(to_item(items)), ...);
    return apply(p, x);
  }

  /// One Slice over the sliced and indexed axes, then a Reshape dropping the indexed ones.
  static void onnx_export(onnx_export_context& cx, const params& p);
  /// Slice, its bounds and steps known at import time.
  static std::vector<onnx_import_rule> onnx_imports() {
    return {{"Slice", {"starts", "ends", "axes"}, {1, 2, 3, 4}, &import_slice},
            {"Gather", {"axis"}, {1}, &import_gather},
            {"Split", {"axis", "split", "num_outputs"}, {1}, &import_split}};
  }

 private:
  template <class I>
  static index_item to_item(const I& i) {
    if constexpr (std::integral<I>) {
      if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t))
        if (i > static_cast<I>(std::numeric_limits<std::int64_t>::max()))
          throw value_error(std::string(target) + ": index " + std::to_string(i) + " does not fit in int64");
      return static_cast<std::int64_t>(i);
    } else {
      return i;
    }
  }
  static void import_slice(onnx_import_context& cx);
  /// Gather with indices known at import time: a scalar index is an integer item, a vector of
  /// indices in steps of one sign a slice, other indices unit slices joined by concat.
  static void import_gather(onnx_import_context& cx);
  /// Split: one slice per output along the axis.
  static void import_split(onnx_import_context& cx);
  /// x[:, ..., item] with `item` on axis `axis` of a rank-`rank` tensor.
  static params on_axis(std::size_t axis, std::size_t rank, index_item item) {
    params p;
    p.index.items.assign(rank, all);
    p.index.items[axis] = std::move(item);
    return p;
  }
};
inline constexpr getitem_fn getitem{};
TRACEMOD_REGISTER_BUILTIN_OP(getitem_fn);

inline void getitem_fn::onnx_export(onnx_export_context& cx, const params& p) {
  const Shape& x = cx.input(0).shape;
  (void)detail::index_plan(p.index, x, cx.call().where);  // the errors eager mode would raise
  // Python's bounds as written: ONNX clamps them as Python does, so the node is right for any extent
  // (a dynamic batch). Absent bounds are the extremes; an integer i is i:i+1 (-1 is -1:INT64_MAX).
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> starts, ends, axes, steps;
  std::vector<bool> kept;
  const std::vector<index_item> items = detail::expand_index(p.index, x.rank());
  for (std::size_t a = 0; a < items.size(); ++a) {
    const auto* s = std::get_if<slice>(&items[a]);
    kept.push_back(s != nullptr);
    if (s != nullptr && !s->start && !s->stop && s->step.value_or(1) == 1) continue;  // the whole axis
    if (s != nullptr) {
      const std::int64_t step = s->step.value_or(1);
      starts.push_back(s->start.value_or(step > 0 ? 0 : highest));
      ends.push_back(s->stop.value_or(step > 0 ? highest : lowest));
      steps.push_back(step);
    } else {
      const std::int64_t i = std::get<std::int64_t>(items[a]);
      starts.push_back(i);
      ends.push_back(i == -1 ? highest : i + 1);
      steps.push_back(1);
    }
    axes.push_back(static_cast<std::int64_t>(a));
  }
  if (starts.empty()) {
    cx.node("Identity", {cx.input(0).name}, {cx.output()});
    return;
  }
  const std::vector<std::string> in{cx.input(0).name, cx.graph().ints(starts, "starts"), cx.graph().ints(ends, "ends"),
                                    cx.graph().ints(axes, "axes"), cx.graph().ints(steps, "steps")};
  if (std::find(kept.begin(), kept.end(), false) == kept.end()) {
    cx.node("Slice", in, {cx.output()});
    return;
  }
  const std::string sliced = cx.node1("Slice", in, cx.fresh(cx.output() + "_slice"));
  // The axes in front of the first indexed one keep their place, so Reshape copies them (0).
  const Shape& out = cx.output_shape();
  std::vector<std::int64_t> shape(out.begin(), out.end());
  for (std::size_t a = 0; a < shape.size() && kept[a]; ++a) shape[a] = 0;
  cx.node("Reshape", {sliced, cx.graph().ints(shape, "shape")}, {cx.output()});
}

inline void getitem_fn::import_slice(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  const bool inputs = cx.opset() >= 10;  // starts, ends, axes and steps were attributes before opset 10
  const std::vector<std::int64_t> starts = inputs ? cx.integers(1, "starts") : cx.attr_ints("starts");
  const std::vector<std::int64_t> ends = inputs ? cx.integers(2, "ends") : cx.attr_ints("ends");
  std::vector<std::int64_t> axes = inputs ? (cx.has_input(3) ? cx.integers(3, "axes") : std::vector<std::int64_t>{})
                                          : cx.attr_ints("axes");
  const std::vector<std::int64_t> steps =
      inputs && cx.has_input(4) ? cx.integers(4, "steps") : std::vector<std::int64_t>(starts.size(), 1);
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    cx.unsupported("starts, ends, axes and steps of different lengths");
  // ONNX clamps the bounds as Python does (negative ones count from the end), so each becomes a slice.
  params p;
  p.index.items.assign(s.rank(), all);
  static_cast<void>(detail::onnx_axis_set(cx, axes, s.rank()));  // each axis at most once
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t a = normalize_axis(axes[i], s.rank(), cx.op_type());
    p.index.items[a] = slice(starts[i], ends[i], steps[i]);
  }
  cx.bind(cx.call<getitem_fn>(p, x));
}

inline void getitem_fn::import_gather(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  const std::size_t axis = normalize_axis(cx.attr_int("axis", 0), s.rank(), cx.op_type());
  const std::int64_t extent = s[axis];
  std::vector<std::int64_t> idx = cx.integers(1, "indices");
  const Shape idx_shape = cx.static_shape(1, "indices");
  for (std::int64_t& i : idx) {
    if (i < -extent || i >= extent)
      cx.unsupported("index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) + " of " + s.to_string());
    if (i < 0) i += extent;
  }
  if (idx_shape.rank() == 0) {
    cx.bind(cx.call<getitem_fn>(on_axis(axis, s.rank(), idx[0]), x));
    return;
  }
  const std::int64_t step = idx.size() > 1 ? idx[1] - idx[0] : 1;
  bool progression = idx_shape.rank() == 1 && !idx.empty() && step != 0;
  for (std::size_t k = 1; progression && k < idx.size(); ++k) progression = idx[k] - idx[k - 1] == step;
  if (progression) {
    const std::int64_t last = idx.back();
    slice every;  // idx[0]::step up to last; a negative step down to index 0 has no stop
    every.start = idx[0];
    every.stop = step > 0 || last + step >= 0 ? std::optional(last + step) : std::nullopt;
    every.step = step;
    cx.bind(cx.call<getitem_fn>(on_axis(axis, s.rank(), every), x));
    return;
  }
  // Any other indices: one unit slice per index, joined on the axis, then the indices' shape there.
  constexpr std::size_t most = 64;
  if (idx.empty() || idx.size() > most)
    cx.unsupported("indices " + idx_shape.to_string() + " (import writes at most " + std::to_string(most) +
                   " gathered slices that are not in steps of one sign)");
  std::vector<onnx_value> parts;
  for (std::int64_t i : idx) parts.push_back(cx.call<getitem_fn>(on_axis(axis, s.rank(), slice(i, i + 1)), x));
  const onnx_value joined = cx.call<concat_fn>({static_cast<std::int64_t>(axis)}, std::move(parts));
  if (idx_shape.rank() == 1) {
    cx.bind(joined);
    return;
  }
  if (s.rank() - 1 + idx_shape.rank() > Shape::max_rank)
    cx.unsupported("indices " + idx_shape.to_string() + " into " + s.to_string() + ": a result of rank over " +
                   std::to_string(Shape::max_rank));
  int_list out;
  for (std::size_t a = 0; a < s.rank(); ++a) {
    if (a != axis) out.push_back(s[a]);
    else
      for (std::int64_t e : idx_shape) out.push_back(e);
  }
  cx.bind(cx.call<reshape_fn>({out}, joined));
}

inline void getitem_fn::import_split(onnx_import_context& cx) {
  const onnx_value x = cx.tensor(0);
  const Shape& s = cx.shape(x);
  const std::size_t axis = normalize_axis(cx.attr_int("axis", 0), s.rank(), cx.op_type());
  std::vector<std::int64_t> sizes = cx.opset() >= 13 ? (cx.has_input(1) ? cx.integers(1, "split") : std::vector<std::int64_t>{})
                                                     : cx.attr_ints("split");
  const int outputs = cx.output_count();
  if (sizes.empty()) {  // equal parts, the last smaller (num_outputs, opset 18)
    const std::int64_t part = (s[axis] + outputs - 1) / outputs;
    for (int k = 0; k < outputs; ++k) sizes.push_back(std::clamp<std::int64_t>(s[axis] - k * part, 0, part));
  }
  std::int64_t total = 0;
  for (std::int64_t n : sizes) total += n;
  const bool negative = std::any_of(sizes.begin(), sizes.end(), [](std::int64_t n) { return n < 0; });
  if (static_cast<int>(sizes.size()) != outputs || total != s[axis] || negative)
    cx.unsupported("split " + ints_repr(sizes) + " into " + std::to_string(outputs) + " outputs of axis " +
                   std::to_string(axis) + " of " + s.to_string());
  std::int64_t at = 0;
  for (int k = 0; k < outputs; ++k) {
    cx.bind_output(k, cx.call<getitem_fn>(on_axis(axis, s.rank(), slice(at, at + sizes[static_cast<std::size_t>(k)])), x));
    at += sizes[static_cast<std::size_t>(k)];
  }
}

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
