// The xtensor bridge: views share the tensor's buffer, expressions evaluate into new tensors.
#include <tracemod/core/factories.hpp>
#include <tracemod/core/xtensor.hpp>

#include <doctest/doctest.h>

#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace tmod_test_core_xtensor {

namespace tmod = tracemod;

namespace {

template <class A>
concept viewable = requires(A&& a) { tmod::to_xt(std::forward<A>(a)); };

// A view of a temporary would dangle: only named tensors can be viewed.
static_assert(viewable<tmod::Tensor&>);
static_assert(viewable<const tmod::Tensor&>);
static_assert(!viewable<tmod::Tensor>);
static_assert(!viewable<const tmod::Tensor>);

// A view of a const tensor is read-only.
static_assert(std::is_same_v<decltype(*tmod::to_xt(std::declval<const tmod::Tensor&>()).data()), const float&>);
static_assert(std::is_same_v<decltype(*tmod::to_xt(std::declval<tmod::Tensor&>()).data()), float&>);

std::vector<std::size_t> extents(const tmod::Shape& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("to_xt: the view aliases the tensor's buffer, row-major, with its shape") {
  tmod::Tensor t = tmod::randn({2, 3, 5}, 1);
  auto view = tmod::to_xt(t);
  CHECK(view.data() == t.data<float>());
  CHECK(std::vector<std::size_t>(view.shape().begin(), view.shape().end()) == extents(t.shape()));
  CHECK(view.dimension() == 3);
  CHECK(view.strides()[0] == 15);
  CHECK(view.strides()[1] == 5);
  CHECK(view.strides()[2] == 1);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 5; ++k)
        CHECK(view(static_cast<std::size_t>(i), static_cast<std::size_t>(j), static_cast<std::size_t>(k)) ==
              t.at({i, j, k}));

  // Writes through the view, element by element and by whole-expression assignment, land in t
  // and in every tensor sharing its buffer.
  const tmod::Tensor alias = t.reshape({30});
  view(1, 2, 4) = 42.f;
  CHECK(t.at({1, 2, 4}) == 42.f);
  CHECK(alias.at({29}) == 42.f);
  view += 1.f;
  CHECK(t.at({1, 2, 4}) == 43.f);
  CHECK(t.data<float>() == alias.data<float>());

  const tmod::Tensor& ct = t;
  const auto cview = tmod::to_xt(ct);
  CHECK(cview.data() == t.data<float>());
  CHECK(cview(1, 2, 4) == 43.f);
}

TEST_CASE("to_xt: rank 0, empty and int32 tensors") {
  tmod::Tensor s = tmod::scalar_tensor(2.5f);
  auto sv = tmod::to_xt(s);
  CHECK(sv.dimension() == 0);
  CHECK(sv() == 2.5f);

  tmod::Tensor e = tmod::zeros({3, 0, 2});
  CHECK(tmod::to_xt(e).size() == 0);

  tmod::Tensor i = tmod::tensor({{1, 2, 3}, {4, 5, 6}});
  auto iv = tmod::to_xt<std::int32_t>(i);
  iv(1, 0) = -7;
  CHECK(i.at<std::int32_t>({1, 0}) == -7);
  CHECK(xt::sum(iv)() == 1 + 2 + 3 - 7 + 5 + 6);
}

TEST_CASE("to_xt: a view of the wrong element type or of no tensor throws") {
  tmod::Tensor f = tmod::zeros({2});
  CHECK_THROWS_WITH_AS((void)tmod::to_xt<std::int32_t>(f), "to_xt: requested a view of int32 elements on a float32 tensor of shape (2,)",
                       tmod::dtype_error);
  const tmod::Tensor i = tmod::tensor({1, 2});
  CHECK_THROWS_AS((void)tmod::to_xt(i), tmod::dtype_error);
  tmod::Tensor undefined;
  CHECK_THROWS_AS((void)tmod::to_xt(undefined), tmod::value_error);
}

TEST_CASE("from_xt: a broadcast expression evaluates into a new tensor") {
  const tmod::Tensor a = tmod::randn({2, 3, 17}, 2);
  const tmod::Tensor b = tmod::randn({17}, 3);
  const tmod::Tensor c = tmod::randn({3, 1}, 4);
  const tmod::Tensor r = tmod::from_xt(tmod::to_xt(a) + 2 * tmod::to_xt(b) - tmod::to_xt(c));
  REQUIRE(r.shape() == tmod::Shape{2, 3, 17});
  REQUIRE(r.dtype() == tmod::DType::float32);
  CHECK(!r.shares_storage_with(a));
  std::size_t wrong = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 17; ++k)
        wrong += r.at({i, j, k}) != a.at({i, j, k}) + 2.f * b.at({k}) - c.at({j, 0});
  CHECK(wrong == 0);
}

TEST_CASE("from_xt: round trip, containers, reductions and conversions") {
  const tmod::Tensor t = tmod::randn({7, 13}, 5);
  const tmod::Tensor copy = tmod::from_xt(tmod::to_xt(t));
  CHECK(!copy.shares_storage_with(t));
  REQUIRE(copy.shape() == t.shape());
  CHECK(std::equal(copy.values<float>().begin(), copy.values<float>().end(), t.values<float>().begin()));

  const xt::xarray<float> literal{{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}};
  const tmod::Tensor from_literal = tmod::from_xt(literal);
  REQUIRE(from_literal.shape() == tmod::Shape{3, 2});
  CHECK(from_literal.at({2, 1}) == 6.f);

  // A reduction to rank 0.
  const tmod::Tensor total = tmod::from_xt(xt::sum(literal));
  CHECK(total.ndim() == 0);
  CHECK(total.item() == 21.f);

  // int32 expressions stay int32.
  const tmod::Tensor i = tmod::tensor({{1, -2}, {3, 4}});
  const tmod::Tensor doubled = tmod::from_xt(tmod::to_xt<std::int32_t>(i) * 2);
  REQUIRE(doubled.dtype() == tmod::DType::int32);
  CHECK(doubled.at<std::int32_t>({0, 1}) == -4);
  CHECK(doubled.at<std::int32_t>({1, 1}) == 8);

  // Other element types convert only on request.
  const tmod::Tensor halves = tmod::from_xt<float>(tmod::to_xt(t) * 0.5);
  REQUIRE(halves.dtype() == tmod::DType::float32);
  CHECK(halves.at({3, 4}) == static_cast<float>(static_cast<double>(t.at({3, 4})) * 0.5));
  const tmod::Tensor truncated = tmod::from_xt<std::int32_t>(xt::xarray<double>{1.9, -1.9});
  CHECK(truncated.at<std::int32_t>({0}) == 1);
  CHECK(truncated.at<std::int32_t>({1}) == -1);

  const tmod::Tensor empty = tmod::from_xt(xt::zeros<float>({4, 0}));
  CHECK(empty.shape() == tmod::Shape{4, 0});
}

TEST_CASE("from_xt: more than 8 dimensions is a shape_error") {
  const xt::xarray<float> rank9 = xt::ones<float>(std::vector<std::size_t>(9, 1));
  CHECK_THROWS_WITH_AS((void)tmod::from_xt(rank9), "from_xt: the expression has rank 9, above the maximum of 8",
                       tmod::shape_error);
}

}  // namespace tmod_test_core_xtensor
