// flatten, reshape, transpose and concat against the PyTorch goldens (exact: they move values) and
// scalar loops; flatten and reshape are views sharing the input's buffer, transpose and concat copy.
#include "functional/golden_case.hpp"

#include <tracemod/core/factories.hpp>
#include <tracemod/functional/shape_ops.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tmod_test_functional_shape_ops {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
using tmod::Shape;
using tmod::Tensor;

TEST_CASE("functional: flatten matches the goldens and is a view") {
  const std::size_t count = golden_case::for_each_case("flatten", [](const std::string& name, auto& args) {
    const F::flatten_fn::params p{.start_axis = args.integer("start_axis", 0),
                                  .end_axis = args.integer("end_axis", -1)};
    const auto in = golden_case::inputs(name, 1, 1);
    const Tensor y = F::flatten(in[0], p);
    golden::check_close(y, golden::load(name, "out"), 0, 0, name);
    CHECK_MESSAGE(y.shares_storage_with(in[0]), name << ": flatten copied");
  });
  CHECK(count >= 8);
}

TEST_CASE("functional: reshape matches the goldens and is a view") {
  const std::size_t count = golden_case::for_each_case("reshape", [](const std::string& name, auto& args) {
    const F::int_list target = args.required_list("target_shape");
    const auto in = golden_case::inputs(name, 1, 1);
    const Tensor y = F::reshape(in[0], target);
    golden::check_close(y, golden::load(name, "out"), 0, 0, name);
    CHECK_MESSAGE(y.shares_storage_with(in[0]), name << ": reshape copied");
  });
  CHECK(count >= 6);
}

TEST_CASE("functional: transpose matches the goldens") {
  const std::size_t count = golden_case::for_each_case("transpose", [](const std::string& name, auto& args) {
    const F::int_list pattern = args.required_list("pattern");
    const auto in = golden_case::inputs(name, 1, 1);
    const Tensor y = F::transpose(in[0], pattern);
    golden::check_close(y, golden::load(name, "out"), 0, 0, name);
    CHECK_FALSE_MESSAGE(y.shares_storage_with(in[0]), name << ": transpose returned a view");
  });
  CHECK(count >= 9);
}

TEST_CASE("functional: concat matches the goldens") {
  const std::size_t count = golden_case::for_each_case("concat", [](const std::string& name, auto& args) {
    const F::concat_fn::params p{.axis = args.integer("axis", 0)};
    const std::vector<Tensor> in = golden_case::inputs(name, 1, 16);
    const Tensor expected = golden::load(name, "out");
    golden::check_close(F::concat(in, p), expected, 0, 0, name);
    golden::check_close(F::concat(std::span<const Tensor>(in), p), expected, 0, 0, name + " (span)");
  });
  CHECK(count >= 6);
}

TEST_CASE("functional: flatten and reshape views write through to the input") {
  Tensor x = tmod::arange(0, 24).reshape({2, 3, 4});
  Tensor flat = F::flatten(x, {.start_axis = 1});
  Tensor r = F::reshape(x, {4, -1});
  CHECK(flat.shape() == Shape{2, 12});
  CHECK(r.shape() == Shape{4, 6});
  CHECK(flat.shares_storage_with(x));
  CHECK(r.shares_storage_with(x));
  flat.data<float>()[5] = -1.f;
  CHECK(x.at({0, 1, 1}) == -1.f);
  CHECK(r.at({0, 5}) == -1.f);
  // reshape and flatten keep every element in row-major order
  for (std::int64_t i = 0; i < 24; ++i)
    if (i != 5) CHECK(r.data<float>()[i] == static_cast<float>(i));
}

TEST_CASE("functional: flatten and reshape of rank 0, empty and size-1 shapes") {
  const Tensor s = tmod::scalar_tensor(4.f);
  CHECK(F::flatten(s).shape() == Shape{1});
  CHECK(F::flatten(s).item() == 4.f);
  CHECK(F::reshape(s, {1, 1}).shape() == Shape{1, 1});
  CHECK(F::reshape(tmod::zeros({1, 1}), {}).shape() == Shape{});
  CHECK(F::reshape(tmod::zeros({3}), {-1, 1, 1}).shape() == Shape{3, 1, 1});
  CHECK_THROWS_AS(F::reshape(tmod::zeros({0, 4}), {2, 0, -1}), tmod::shape_error);  // -1 is ambiguous (PyTorch too)
  CHECK(F::reshape(tmod::zeros({0, 4}), {4, 0}).shape() == Shape{4, 0});
  CHECK(F::flatten(tmod::zeros({2, 0, 3})).shape() == Shape{0});
  CHECK(F::flatten(tmod::zeros({2, 3, 4}), {.start_axis = -1}).shape() == Shape{2, 3, 4});
  CHECK(F::flatten(tmod::zeros({2, 3, 4}), {.start_axis = 0, .end_axis = 0}).shape() == Shape{2, 3, 4});
}

// y[i0, i1, ...] = x[index with axis perm[k] = i_k], by explicit index arithmetic.
Tensor reference_transpose(const Tensor& x, const std::vector<std::size_t>& perm) {
  const Shape& in = x.shape();
  Shape out;
  for (std::size_t d : perm) out.push_back(in[d]);
  Tensor y = tmod::Tensor::empty(out);
  const tmod::Strides st = tmod::contiguous_strides(in);
  std::vector<std::int64_t> idx(out.rank(), 0);
  for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
    std::int64_t src = 0;
    for (std::size_t k = 0; k < out.rank(); ++k) src += idx[k] * st[perm[k]];
    y.data<float>()[flat] = x.data<float>()[src];
    for (std::size_t k = out.rank(); k-- > 0;) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  return y;
}

F::int_list to_int_list(const std::vector<std::size_t>& p) {
  const auto v = [&](std::size_t i) { return static_cast<std::int64_t>(p[i]); };
  switch (p.size()) {
    case 1: return {v(0)};
    case 2: return {v(0), v(1)};
    case 3: return {v(0), v(1), v(2)};
    case 4: return {v(0), v(1), v(2), v(3)};
    default: return {v(0), v(1), v(2), v(3), v(4)};
  }
}

TEST_CASE("functional: transpose by every permutation of ranks 1 to 5, against a scalar loop") {
  const Shape shapes[] = {{19}, {17, 33}, {3, 1, 17}, {2, 3, 5, 7}, {2, 3, 1, 5, 17}};
  std::uint64_t seed = 1;
  std::size_t permutations = 0;
  for (const Shape& s : shapes) {
    const Tensor x = tmod::randn(s, seed++);
    std::vector<std::size_t> perm(s.rank());
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    do {
      CAPTURE(s.to_string());
      CAPTURE(F::repr(to_int_list(perm)));
      golden::check_close(F::transpose(x, to_int_list(perm)), reference_transpose(x, perm), 0, 0);
      ++permutations;
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  CHECK(permutations == 1 + 2 + 6 + 24 + 120);
  // rank 0 with the empty pattern, and empty extents
  CHECK(F::transpose(tmod::scalar_tensor(2.f), {}).item() == 2.f);
  CHECK(F::transpose(tmod::zeros({0, 5, 2}), {2, 1, 0}).shape() == Shape{2, 5, 0});
  // transposing twice by a permutation and its inverse gives the input back
  const Tensor x = tmod::randn({2, 3, 4, 5}, 9);
  golden::check_close(F::transpose(F::transpose(x, {0, 2, 3, 1}), {0, 3, 1, 2}), x, 0, 0);
}

TEST_CASE("functional: concat of three along each axis, against a scalar loop") {
  const Shape base{2, 3, 5};
  for (std::int64_t axis = -3; axis < 3; ++axis) {
    CAPTURE(axis);
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
    std::array<Tensor, 3> parts;
    std::array<std::int64_t, 3> extents{1, 4, 0};  // an empty part too
    for (std::size_t i = 0; i < 3; ++i) {
      Shape s = base;
      s[a] = extents[i];
      parts[i] = tmod::randn(s, 20 + i);
    }
    const Tensor y = F::concat({parts[0], parts[1], parts[2]}, {.axis = axis});
    Shape out = base;
    out[a] = 5;
    REQUIRE(y.shape() == out);
    const tmod::Strides st = tmod::contiguous_strides(out);
    for (std::int64_t flat = 0; flat < y.numel(); ++flat) {
      std::array<std::int64_t, 3> idx{flat / st[0], flat % st[0] / st[1], flat % st[1]};
      std::size_t part = 0;
      while (idx[a] >= extents[part]) idx[a] -= extents[part++];
      CHECK(y.data<float>()[flat] == parts[part].at({idx[0], idx[1], idx[2]}));
    }
  }
  // a single input is copied, not aliased
  const Tensor one = tmod::randn({4}, 5);
  const Tensor c = F::concat({one});
  CHECK_FALSE(c.shares_storage_with(one));
  golden::check_close(c, one, 0, 0);
}

}  // namespace

}  // namespace tmod_test_functional_shape_ops
