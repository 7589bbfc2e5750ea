// matmul and linear, on the packed GEMM kernel.
#pragma once

#include <tracemod/functional/elementwise.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/gemm.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <tuple>

namespace tracemod::functional {

struct matmul_params {
  bool transpose_a = false;
  bool transpose_b = false;
};

/// Matrix product with numpy's rules: 1-D operands are promoted (and the added axis dropped),
/// leading batch dimensions broadcast. transpose_a/transpose_b transpose the last two axes first.
struct matmul_fn : op_base<matmul_fn> {
  static constexpr std::string_view name = "matmul";
  static constexpr std::string_view target = "math.matmul";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands{operand{"inp1", operand_kind::tensor}, operand{"inp2", operand_kind::tensor}};
  using params = matmul_params;
  static constexpr std::tuple fields{positional("transpose_a", &params::transpose_a),
                                     positional("transpose_b", &params::transpose_b)};

  /// The product's geometry: batch shape, m, n, k, and the output shape.
  struct plan {
    Shape batch, out;
    std::int64_t m, n, k;
  };

  static constexpr plan make_plan(const params& p, const Shape& a, const Shape& b) {
    if (a.rank() == 0 || b.rank() == 0)
      throw shape_error(std::string(target) + ": operands must have rank >= 1, got " + a.to_string() + " and " +
                        b.to_string());
    const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
    // Logical (rows, cols) of each operand after the optional transposition.
    std::int64_t ar = a_vec ? 1 : a[a.rank() - 2], ac = a.back();
    std::int64_t br = b_vec ? b[0] : b[b.rank() - 2], bc = b_vec ? 1 : b.back();
    if (p.transpose_a && !a_vec) std::swap(ar, ac);
    if (p.transpose_b && !b_vec) std::swap(br, bc);
    if (ac != br)
      throw shape_error(std::string(target) + ": inner dimensions differ: " + a.to_string() + " @ " + b.to_string() +
                        (p.transpose_a || p.transpose_b ? " (after transposition)" : "") + " gives " +
                        std::to_string(ac) + " vs " + std::to_string(br));
    const Shape a_batch = a.rank() > 2 ? Shape(a.begin(), a.end() - 2) : Shape{};
    const Shape b_batch = b.rank() > 2 ? Shape(b.begin(), b.end() - 2) : Shape{};
    if (!broadcastable(a_batch, b_batch))
      throw shape_error(std::string(target) + ": batch dimensions of " + a.to_string() + " and " + b.to_string() +
                        " cannot be broadcast together");
    plan pl{broadcast_shapes(a_batch, b_batch, target), {}, ar, bc, ac};
    pl.out = pl.batch;
    if (!a_vec) pl.out.push_back(ar);
    if (!b_vec) pl.out.push_back(bc);
    return pl;
  }

  static constexpr Shape infer_shape(const params& p, const Shape& a, const Shape& b) { return make_plan(p, a, b).out; }

  /// make_plan's output over symbolic dims: the broadcast batch axes, then m and n.
  static Dims infer_dims(const params& p, const ShapeDims& a, const ShapeDims& b) {
    const Dims& ad = a.dims;
    const Dims& bd = b.dims;
    const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    DimExpr ar = a_vec ? DimExpr(1) : ad[ad.size() - 2], ac = ad.back();
    DimExpr br = b_vec ? bd[0] : bd[bd.size() - 2], bc = b_vec ? DimExpr(1) : bd.back();
    if (p.transpose_a && !a_vec) std::swap(ar, ac);
    if (p.transpose_b && !b_vec) std::swap(br, bc);
    const auto batch = [](const ShapeDims& x) {
      const std::size_t n = x.dims.size() > 2 ? x.dims.size() - 2 : 0;
      return ShapeDims{Dims(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(n)),
                       Shape(x.shape.begin(), x.shape.begin() + n)};
    };
    const ShapeDims ab = batch(a), bb = batch(b);
    Dims out = broadcast_dims(ab.dims, ab.shape, bb.dims, bb.shape, target);
    if (!a_vec) out.push_back(ar);
    if (!b_vec) out.push_back(bc);
    return out;
  }

  /// Each of the batch x m x n output elements accumulates k products.
  static constexpr op_cost cost(const params& p, const Shape&, const Shape& a, const Shape& b) {
    const plan pl = make_plan(p, a, b);
    return mac_cost(pl.batch.numel() * pl.m * pl.n * pl.k);
  }

  static Tensor eager(const params& p, const Tensor& a, const Tensor& b) {
    require_float32(target, "inp1", a);
    require_float32(target, "inp2", b);
    const plan pl = make_plan(p, a.shape(), b.shape());
    Tensor y = Tensor::empty(pl.out, DType::float32, target);
    const bool ta = p.transpose_a && a.ndim() > 1, tb = p.transpose_b && b.ndim() > 1;
    const std::int64_t a_mat = pl.m * pl.k, b_mat = pl.k * pl.n;
    const std::int64_t lda = ta ? pl.m : pl.k, ldb = tb ? pl.k : pl.n;
    if (a.ndim() > 2 && b.ndim() == 2 && !ta) {  // one matrix for every batch: the batch is rows of one product
      kernels::gemm(false, tb, pl.batch.numel() * pl.m, pl.n, pl.k, 1.f, a.data<float>(), lda, b.data<float>(), ldb, 0.f,
                    y.data<float>(), pl.n);
      return y;
    }
    // Walk the broadcast batch; an operand whose batch extent is 1 (or absent) along an axis stays put.
    const Shape& batch = pl.batch;
    const std::size_t r = batch.rank();
    auto batch_stride = [&](const Shape& s, std::int64_t mat) {
      Strides st{};
      const std::size_t sr = s.rank() > 2 ? s.rank() - 2 : 0;
      std::int64_t acc = mat;
      for (std::size_t i = sr; i-- > 0;) {
        st[r - sr + i] = s[i] == 1 ? 0 : acc;
        acc *= s[i];
      }
      return st;
    };
    const Strides sa = batch_stride(a.shape(), a_mat), sb = batch_stride(b.shape(), b_mat);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* py = y.data<float>();
    std::array<std::int64_t, Shape::max_rank> idx{};
    for (std::int64_t i = 0, count = batch.numel(); i < count; ++i) {
      std::int64_t oa = 0, ob = 0;
      for (std::size_t d = 0; d < r; ++d) {
        oa += idx[d] * sa[d];
        ob += idx[d] * sb[d];
      }
      kernels::gemm(ta, tb, pl.m, pl.n, pl.k, 1.f, pa + oa, lda, pb + ob, ldb, 0.f, py + i * pl.m * pl.n, pl.n);
      for (std::size_t d = r; d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p) {
    // Transpose's default permutation reverses every axis; matmul's flags swap only the last two.
    const auto operand = [&](const onnx_operand& o, bool transposed) {
      if (!transposed || o.shape.rank() < 2) return o.name;
      std::vector<std::int64_t> perm;
      for (std::size_t i = 0; i < o.shape.rank(); ++i) perm.push_back(static_cast<std::int64_t>(i));
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      return cx.node1("Transpose", {o.name}, cx.fresh(o.name + "_t"), {{"perm", perm}});
    };
    cx.node("MatMul", {operand(cx.input(0), p.transpose_a), operand(cx.input(1), p.transpose_b)}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("MatMul")};
  static void onnx_import(onnx_import_context& cx) { cx.bind(cx.call<matmul_fn>({}, cx.tensor(0), cx.tensor(1))); }
};
inline constexpr matmul_fn matmul{};
TRACEMOD_REGISTER_BUILTIN_OP(matmul_fn);

/// y = x @ weight^T + bias, weight of shape (out_features, in_features), x of shape (..., in_features).
struct linear_fn : op_base<linear_fn> {
  static constexpr std::string_view name = "linear";
  static constexpr std::string_view target = "nn.linear";
  static constexpr call_kind kind = call_kind::function;
  static constexpr std::array operands = weighted_operands;
  using params = no_params;
  static constexpr std::tuple<> fields{};

  /// The typed tracer's check of static operand shapes (as conv2d_fn's).
  template <class X, class W, class Bias>
  static consteval bool check_static_shapes() {
    if constexpr (X::is_static && W::is_static) {
      constexpr bool agree = W::value.rank() == 2 && X::value.rank() >= 1 && X::value.back() == W::value[1];
      static_assert(agree,
                    "tmod::symbolic_trace: F::linear's static input features do not match the weight's "
                    "in_features (input (..., in) needs weight (out, in)); fix the spec shapes");
      return agree;
    }
    return true;
  }

  static Dims infer_dims(const params&, const ShapeDims& x, const ShapeDims& w, const ShapeDims*) {
    Dims out(x.dims.begin(), x.dims.end() - 1);
    out.push_back(w.dims[0]);
    return out;
  }
  static constexpr Shape infer_shape(const params&, const Shape& x, const Shape& w, const Shape* bias) {
    if (x.rank() < 1 || w.rank() != 2 || x.back() != w[1])
      throw shape_error(std::string(target) + ": input " + x.to_string() + " does not match weight " + w.to_string() +
                        " (expected input (..., " + (w.rank() == 2 ? std::to_string(w[1]) : std::string("in")) +
                        ") and weight (out_features, in_features))");
    if (bias && !(bias->rank() == 1 && (*bias)[0] == w[0]))
      throw shape_error(std::string(target) + ": bias " + bias->to_string() + " does not match weight " +
                        w.to_string() + " (expected (" + std::to_string(w[0]) + ",))");
    Shape out(x.begin(), x.end() - 1);
    out.push_back(w[0]);
    return out;
  }

  /// Each output element accumulates in_features products; a bias adds one operation per element.
  static constexpr op_cost cost(const params&, const Shape& out, const Shape& x, const Shape&, const Shape* bias) {
    return mac_cost(out.numel() * x.back(), bias ? out.numel() : 0);
  }

  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, none_t) { return run(p, x, w, nullptr); }
  static Tensor eager(const params& p, const Tensor& x, const Tensor& w, const Tensor& b) { return run(p, x, w, &b); }

 private:
  static Tensor run(const params& p, const Tensor& x, const Tensor& w, const Tensor* b) {
    require_float32(target, "inp", x);
    require_float32(target, "weight", w);
    if (b) require_float32(target, "bias", *b);
    const Shape bias_shape = b ? b->shape() : Shape{};
    Tensor y = Tensor::empty(infer_shape(p, x.shape(), w.shape(), b ? &bias_shape : nullptr), DType::float32, target);
    const std::int64_t out = w.size(0), in = w.size(1);
    const std::int64_t rows = Shape(x.shape().begin(), x.shape().end() - 1).numel();
    float* py = y.data<float>();
    if (b) {  // seed every row with the bias and accumulate onto it (beta = 1): no extra pass
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(b->data<float>(), out, py + r * out);
    }
    kernels::gemm(false, true, rows, out, in, 1.f, x.data<float>(), in, w.data<float>(), in, b ? 1.f : 0.f, py, out);
    return y;
  }

 public:
  /// Gemm for a 2-D input, else Transpose + MatMul (+ Add).
  static void onnx_export(onnx_export_context& cx, const params&) {
    const std::optional<std::string> bias = onnx_export_context::optional_name(cx.input(2));
    const onnx_operand& x = cx.input(0);
    const onnx_operand& w = cx.input(1);
    if (x.shape.rank() == 2) {
      std::vector<std::string> in{x.name, w.name};
      if (bias) in.push_back(*bias);
      cx.node("Gemm", in, {cx.output()}, {{"transB", std::int64_t{1}}});
      return;
    }
    const std::string wt = cx.node1("Transpose", {w.name}, cx.fresh(w.name + "_t"));
    if (!bias) {
      cx.node("MatMul", {x.name, wt}, {cx.output()});
      return;
    }
    const std::string prod = cx.node1("MatMul", {x.name, wt}, cx.fresh(cx.output() + "_matmul"));
    cx.node("Add", {prod, *bias}, {cx.output()});
  }
  static constexpr std::array onnx_import_types{std::string_view("Gemm")};
  static constexpr std::array onnx_import_attributes{std::string_view("alpha"), std::string_view("beta"),
                                                     std::string_view("transA"), std::string_view("transB"),
                                                     std::string_view("broadcast")};
  static void onnx_import(onnx_import_context& cx) {
    const onnx_value a = cx.tensor(0);
    const onnx_value b = cx.tensor(1);
    const bool ta = cx.attr_int("transA", 0) != 0, tb = cx.attr_int("transB", 0) != 0;
    const double alpha = cx.attr_float("alpha", 1.0f), beta = cx.attr_float("beta", 1.0f);
    std::optional<onnx_value> c;
    if (cx.has_input(2)) c = cx.tensor(2);
    // A fully connected layer (what PyTorch writes for nn.Linear) is tracemod's linear.
    const Shape& bs = cx.shape(b);
    if (!ta && tb && alpha == 1.0 && beta == 1.0 && bs.rank() == 2 && (!c || cx.shape(*c) == Shape{bs[0]})) {
      cx.bind(cx.call<linear_fn>({}, a, b, c ? onnx_arg(*c) : onnx_arg(Value(none))));
      return;
    }
    onnx_value y = cx.call<matmul_fn>({ta, tb}, a, b);
    if (alpha != 1.0) y = cx.call<mul_fn>({}, y, Value(alpha));
    if (c) {
      onnx_value bias = *c;
      if (beta != 1.0) bias = cx.call<mul_fn>({}, bias, Value(beta));
      y = cx.call<add_fn>({}, y, bias);
    }
    cx.bind(y);
  }
};
inline constexpr linear_fn linear{};
TRACEMOD_REGISTER_BUILTIN_OP(linear_fn);

}  // namespace tracemod::functional

#include <tracemod/functional/registry.hpp>  // defines register_op; last, as it includes every op header
