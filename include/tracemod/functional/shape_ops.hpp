// Shape manipulation: flatten and reshape (views sharing the input's buffer), transpose and concat
// (copies through the layout kernels).
#pragma once

#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/layout.hpp>

#include <array>
#include <string>
#include <tuple>
#include <vector>

namespace tracemod::functional {

struct flatten_params {
  std::int64_t start_axis = 0;
  std::int64_t end_axis = -1;
};

/// Merges axes start_axis..end_axis into one (MegEngine's argument names).
struct flatten_fn : op_base<flatten_fn> {
  static constexpr std::string_view name = "flatten";
  static constexpr std::string_view target = "tensor.flatten";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr bool any_dtype = true;  // a view moves no data, so any dtype passes through
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = flatten_params;
  static constexpr std::tuple fields{positional("start_axis", &params::start_axis),
                                     positional("end_axis", &params::end_axis)};

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    if (x.rank() == 0) return Shape{1};
    const std::size_t s = normalize_axis(p.start_axis, x.rank(), target);
    const std::size_t e = normalize_axis(p.end_axis, x.rank(), target);
    if (s > e)
      throw value_error(std::string(target) + ": start_axis " + std::to_string(p.start_axis) + " comes after end_axis " +
                        std::to_string(p.end_axis) + " for shape " + x.to_string());
    Shape out(x.begin(), x.begin() + s);
    (void)x.numel(target);  // a symbolic shape may be unallocatable; then the merged extent would overflow
    std::int64_t merged = 1;
    for (std::size_t i = s; i <= e; ++i) merged *= x[i];
    out.push_back(merged);
    for (std::size_t i = e + 1; i < x.rank(); ++i) out.push_back(x[i]);
    return out;
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);  // any dtype: a view moves no data
    return x.reshape(infer_shape(p, x.shape()));
  }
};
inline constexpr flatten_fn flatten{};
TRACEMOD_REGISTER_BUILTIN_OP(flatten_fn);

struct reshape_params {
  int_list target_shape;
};

/// A new shape with the same number of elements; one extent may be -1 (inferred).
struct reshape_fn : op_base<reshape_fn> {
  static constexpr std::string_view name = "reshape";
  static constexpr std::string_view target = "tensor.reshape";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr bool any_dtype = true;  // a view moves no data, so any dtype passes through
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = reshape_params;
  static constexpr std::tuple fields{required("target_shape", &params::target_shape)};

  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    const auto fail = [&](const std::string& why) {
      return shape_error(std::string(target) + ": cannot reshape " + x.to_string() + " (" + std::to_string(x.numel()) +
                         " elements) into " + repr(p.target_shape) + ": " + why);
    };
    std::int64_t known = 1;
    std::size_t inferred = p.target_shape.size();
    for (std::size_t i = 0; i < p.target_shape.size(); ++i) {
      const std::int64_t d = p.target_shape[i];
      if (d == -1) {
        if (inferred != p.target_shape.size()) throw fail("more than one -1");
        inferred = i;
      } else if (d < 0) {
        throw fail("negative extent " + std::to_string(d));
      } else {
        if (__builtin_mul_overflow(known, d, &known)) throw fail("the target's element count overflows int64");
      }
    }
    Shape out;
    for (std::size_t i = 0; i < p.target_shape.size(); ++i) {
      if (i != inferred) {
        out.push_back(p.target_shape[i]);
      } else {
        if (known == 0 || x.numel() % known != 0) throw fail("the -1 extent cannot be inferred");
        out.push_back(x.numel() / known);
      }
    }
    if (out.numel(target) != x.numel(target)) throw fail("element counts differ");
    return out;
  }

  static Tensor eager(const params& p, const Tensor& x) {
    require_defined(target, "inp", x);  // any dtype: a view moves no data
    return x.reshape(infer_shape(p, x.shape()));
  }
};
inline constexpr reshape_fn reshape{};
TRACEMOD_REGISTER_BUILTIN_OP(reshape_fn);

struct transpose_params {
  int_list pattern;
};

/// Permutes the axes: output axis i is input axis pattern[i] (MegEngine's F.transpose).
struct transpose_fn : op_base<transpose_fn> {
  static constexpr std::string_view name = "transpose";
  static constexpr std::string_view target = "tensor.transpose";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = transpose_params;
  static constexpr std::tuple fields{required("pattern", &params::pattern)};

  static std::array<std::size_t, Shape::max_rank> permutation(const params& p, const Shape& x) {
    // Only negative axes are checked here (they have no size_t form); transposed_shape checks the rest.
    std::array<std::size_t, Shape::max_rank> perm{};
    for (std::size_t i = 0; i < p.pattern.size(); ++i) {
      if (p.pattern[i] < 0)
        throw value_error(std::string(target) + ": pattern " + repr(p.pattern) + " is not a permutation of the axes of " +
                          x.to_string());
      perm[i] = static_cast<std::size_t>(p.pattern[i]);
    }
    return perm;
  }
  static Shape infer_shape(const params& p, const Shape& x) {
    const auto perm = permutation(p, x);
    return kernels::transposed_shape(x, std::span<const std::size_t>(perm.data(), p.pattern.size()), target);
  }
  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const auto perm = permutation(p, x.shape());
    const std::span<const std::size_t> pspan(perm.data(), p.pattern.size());
    Tensor y = Tensor::empty(kernels::transposed_shape(x.shape(), pspan, target), DType::float32, target);
    kernels::transpose(x.data<float>(), x.shape(), pspan, y.data<float>());
    return y;
  }
};
inline constexpr transpose_fn transpose{};
TRACEMOD_REGISTER_BUILTIN_OP(transpose_fn);

struct concat_params {
  std::int64_t axis = 0;
};

/// Joins tensors along an existing axis.
struct concat_fn : op_base<concat_fn> {
  static constexpr std::string_view name = "concat";
  static constexpr std::string_view target = "tensor.concat";
  static constexpr scale_rule scaling = scale_rule::linear;  // moves elements, never changes them
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inps", operand_kind::tensor_list}};
  using params = concat_params;
  static constexpr std::tuple fields{positional("axis", &params::axis)};

  static Shape infer_shape(const params& p, std::span<const Shape> shapes) {
    if (shapes.empty()) throw value_error(std::string(target) + ": needs at least one input");
    const std::size_t axis = normalize_axis(p.axis, shapes[0].rank(), target);
    return kernels::concat_shape(shapes.data(), shapes.size(), axis, target);
  }
  static Tensor eager(const params& p, std::span<const Tensor> inps) {
    std::vector<Shape> shapes;
    std::vector<const float*> data;
    for (std::size_t i = 0; i < inps.size(); ++i) {
      require_float32(target, "inps[" + std::to_string(i) + "]", inps[i]);
      shapes.push_back(inps[i].shape());
      data.push_back(inps[i].data<float>());
    }
    Tensor y = Tensor::empty(infer_shape(p, shapes), DType::float32, target);
    kernels::concat(data.data(), shapes.data(), shapes.size(), normalize_axis(p.axis, shapes[0].rank(), target),
                    y.data<float>());
    return y;
  }
  static Tensor eager(const params& p, const std::vector<Tensor>& inps) { return eager(p, std::span<const Tensor>(inps)); }
  template <class... T>
  static Tensor eager(const params& p, const std::tuple<T...>& inps) {
    return eager(p, std::apply([](const auto&... t) { return std::vector<Tensor>{Tensor(t)...}; }, inps));
  }

  /// A braced list of tensors is a vector: F::concat({a, b}, 1), F::concat({a, b}, {.axis = 1}).
  using op_base::operator();
  template <std::derived_from<Tensor> T, class... Rest>
  decltype(auto) operator()(std::initializer_list<T> inps, const Rest&... rest) const {
    return (*this)(std::vector<Tensor>(inps.begin(), inps.end()), rest...);
  }
  template <std::derived_from<Tensor> T>
  decltype(auto) operator()(std::initializer_list<T> inps, const params& p) const {
    return (*this)(std::vector<Tensor>(inps.begin(), inps.end()), p);
  }
};
inline constexpr concat_fn concat{};
TRACEMOD_REGISTER_BUILTIN_OP(concat_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
