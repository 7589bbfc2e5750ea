// softmax along one axis (numerically stable).
#pragma once

#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/softmax.hpp>

#include <array>
#include <optional>
#include <tuple>

namespace tracemod::functional {

/// axis=None picks MegEngine's default: 0 for rank 0, 1 and 3, else 1.
struct softmax_params {
  std::optional<std::int64_t> axis{};
};

struct softmax_fn : op_base<softmax_fn> {
  static constexpr std::string_view name = "softmax";
  static constexpr std::string_view target = "nn.softmax";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp", operand_kind::tensor}};
  using params = softmax_params;
  static constexpr std::tuple fields{positional("axis", &params::axis)};

  static constexpr std::size_t resolved_axis(const params& p, const Shape& x) {
    if (x.rank() == 0) return normalize_axis(p.axis.value_or(0), 1, target);  // a scalar has axis 0 (or -1)
    const std::int64_t default_axis = (x.rank() == 1 || x.rank() == 3) ? 0 : 1;
    return normalize_axis(p.axis.value_or(default_axis), x.rank(), target);
  }
  static constexpr Shape infer_shape(const params& p, const Shape& x) {
    (void)resolved_axis(p, x);
    return x;
  }
  static Tensor eager(const params& p, const Tensor& x) {
    require_float32(target, "inp", x);
    const std::size_t axis = resolved_axis(p, x.shape());
    const Shape& s = x.shape();
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= static_cast<std::size_t>(s[i]);
    for (std::size_t i = axis + 1; i < s.rank(); ++i) inner *= static_cast<std::size_t>(s[i]);
    const auto len = s.rank() == 0 ? std::size_t{1} : static_cast<std::size_t>(s[axis]);
    Tensor y = Tensor::empty(s, DType::float32, target);
    kernels::softmax(x.data<float>(), y.data<float>(), outer, len, inner);
    return y;
  }
};
inline constexpr softmax_fn softmax{};
TRACEMOD_REGISTER_BUILTIN_OP(softmax_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
