// Tensor, Shape, QParams and the factories: the error paths (each a tmod::error subclass naming the
// call and the offending shape or value, leaving the tensor as it was) and the argument checks.
// Undefined (default-constructed) tensors are left to tests/robustness.
#include <tracemod/core/factories.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tmod_test_core_tensor {

namespace {

namespace tmod = tracemod;

}  // namespace

TEST_CASE("Shape: rank up to 8, no negative extents, constexpr") {
  static_assert(tmod::Shape::max_rank == 8);
  static_assert(tmod::Shape{2, 3, 4}.numel() == 24);
  static_assert(tmod::Shape{}.numel() == 1);
  static_assert(tmod::Shape{5, 0}.numel() == 0);

  tmod::Shape s{1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(s.rank() == 8);
  CHECK(s.numel() == 40320);
  CHECK_THROWS_WITH_AS(s.push_back(9), "Shape: rank exceeds the maximum of 8", tmod::shape_error);
  CHECK(s == tmod::Shape{1, 2, 3, 4, 5, 6, 7, 8});  // unchanged
  CHECK_THROWS_AS((tmod::Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), tmod::shape_error);
  const std::array<int, 9> nine{};
  CHECK_THROWS_AS(tmod::Shape(nine.begin(), nine.end()), tmod::shape_error);
  CHECK_THROWS_WITH_AS((tmod::Shape{2, -1}), "Shape: negative extent -1", tmod::shape_error);
  CHECK(tmod::Shape{5}.to_string() == "(5,)");
  CHECK(tmod::Shape{}.to_string() == "()");
  CHECK(tmod::Shape{2, 3}.to_string() == "(2, 3)");
}

TEST_CASE("Tensor.at: wrong rank or an index out of range is a shape_error") {
  const tmod::Tensor t = tmod::tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  CHECK(t.at({1, 2}) == 6.f);
  CHECK(t.at({0, 1}) == 2.f);
  CHECK_THROWS_WITH_AS((void)t.at({1}), "Tensor.at: 1 indices for a tensor of shape (2, 3)", tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)t.at({0, 0, 0}), "Tensor.at: 3 indices for a tensor of shape (2, 3)", tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)t.at({0, 3}),
                       "Tensor.at: index 3 out of range for axis 1 of shape (2, 3)", tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)t.at({2, 0}),
                       "Tensor.at: index 2 out of range for axis 0 of shape (2, 3)", tmod::shape_error);
  CHECK_THROWS_AS((void)t.at({-1, 0}), tmod::shape_error);  // no negative indexing
  CHECK_THROWS_AS((void)t.at<std::int32_t>({0, 0}), tmod::dtype_error);
  const tmod::Tensor s = tmod::scalar_tensor(2.5f);
  CHECK(s.at({}) == 2.5f);
  CHECK_THROWS_AS((void)s.at({0}), tmod::shape_error);
}

TEST_CASE("Tensor.item: only a one-element tensor has one") {
  CHECK(tmod::scalar_tensor(-3.f).item() == -3.f);
  CHECK(tmod::full({1, 1, 1}, 7.0).item() == 7.f);
  CHECK(tmod::tensor({{4}}).item<std::int32_t>() == 4);
  CHECK_THROWS_WITH_AS((void)tmod::zeros({2, 3}).item(),
                       "Tensor.item: tensor of shape (2, 3) is not one element", tmod::shape_error);
  CHECK_THROWS_AS((void)tmod::zeros({0}).item(), tmod::shape_error);
  CHECK_THROWS_AS((void)tmod::tensor({4}).item<float>(), tmod::dtype_error);
}

TEST_CASE("Tensor.reshape: a view of the same elements, or a shape_error leaving the tensor as it was") {
  const tmod::Tensor t = tmod::arange(6.0);
  const tmod::Tensor v = t.reshape({2, 3});
  CHECK(v.shape() == tmod::Shape{2, 3});
  CHECK(v.shares_storage_with(t));
  CHECK(v.at({1, 0}) == 3.f);
  CHECK(t.reshape({6, 1, 1}).at({5, 0, 0}) == 5.f);
  CHECK_THROWS_WITH_AS((void)t.reshape({4, 2}),
                       "Tensor.reshape: cannot reshape (6,) (6 elements) into (4, 2)", tmod::shape_error);
  CHECK_THROWS_AS((void)t.reshape({}), tmod::shape_error);
  CHECK_THROWS_AS((void)v.reshape({7}), tmod::shape_error);
  CHECK(t.shape() == tmod::Shape{6});
  CHECK(v.shape() == tmod::Shape{2, 3});
  CHECK(tmod::zeros({0, 3}).reshape({3, 0, 5}).numel() == 0);
}

TEST_CASE("Tensor.data<T>: the wrong element type is a dtype_error naming both types") {
  tmod::Tensor f = tmod::zeros({2});
  const tmod::Tensor i = tmod::zeros({3, 1}, tmod::DType::int32);
  CHECK_THROWS_WITH_AS((void)f.data<std::int32_t>(),
                       "Tensor.data: requested int32 from a float32 tensor of shape (2,)", tmod::dtype_error);
  CHECK_THROWS_WITH_AS((void)i.data<float>(),
                       "Tensor.data: requested float32 from a int32 tensor of shape (3, 1)", tmod::dtype_error);
  CHECK_THROWS_AS((void)i.values<float>(), tmod::dtype_error);
  CHECK(i.data<std::int32_t>()[2] == 0);
  CHECK(f.data<float>()[1] == 0.f);
}

struct sum_tag {
  static constexpr const char* name = "the sum";
};
struct twice_sum_tag {};

TEST_CASE("Tensor.make_read_only: every sharing handle refuses writes for good; derived data is made once") {
  tmod::Tensor t = tmod::arange(0, 6).reshape({2, 3});
  tmod::Tensor view = t.reshape({6});
  CHECK_THROWS_WITH_AS((void)t.derived<float>(tmod::derived_key::of<sum_tag>(), [] { return 0.0f; }),  // still writable
                       "Storage.derived: the sum would be derived from a buffer that may still change (make it "
                       "read-only first)",
                       tmod::value_error);
  view.data<float>()[0] = 7.0f;
  t.make_read_only();
  CHECK(view.read_only());
  CHECK_THROWS_WITH_AS((void)view.data<float>(),
                       "Tensor.data: the float32 tensor of shape (6,) is read-only (a constant whose kernel keeps data "
                       "derived from it); write to a clone()",
                       tmod::value_error);
  CHECK_THROWS_AS((void)t.values<float>(), tmod::value_error);
  const tmod::Tensor& read = t;
  CHECK(read.data<float>()[0] == 7.0f);  // reading is unaffected
  tmod::Tensor copy = t.clone();
  CHECK_FALSE(copy.read_only());
  copy.data<float>()[0] = 1.0f;
  CHECK(read.data<float>()[0] == 7.0f);

  int made = 0;
  const auto sum = [&] {
    ++made;
    float total = 0.0f;
    for (float x : read.values<float>()) total += x;
    return total;
  };
  const tmod::derived_key key = tmod::derived_key::of<sum_tag>();
  CHECK(*t.derived<float>(key, sum) == 22.0f);  // 7 + 1 + 2 + 3 + 4 + 5
  CHECK(*view.derived<float>(key, sum) == 22.0f);  // the same buffer: the same derived data
  CHECK(made == 1);
  CHECK(*t.derived<float>(tmod::derived_key::of<twice_sum_tag>(), [&] { return 2.0f * sum(); }) == 44.0f);
  CHECK(made == 2);
  // The same kind with other parameters (the shape a datum is derived for) is another datum.
  CHECK(*t.derived<float>(tmod::derived_key::of<sum_tag>(t.shape()), [&] { return sum() + 1.0f; }) == 23.0f);
  CHECK(*view.derived<float>(tmod::derived_key::of<sum_tag>(view.shape()), [&] { return sum() + 2.0f; }) == 24.0f);
  CHECK(*t.derived<float>(tmod::derived_key::of<sum_tag>({2, 3}), sum) == 23.0f);
  CHECK(made == 4);
  CHECK_THROWS_WITH_AS((void)tmod::derived_key::of<sum_tag>({1, 2, 3, 4, 5, 6, 7, 8, 9}),
                       "derived_key: the sum depends on more than 8 parameters", tmod::value_error);
}

TEST_CASE("tensor(): nested braces must not be ragged; a span must fill its shape") {
  const tmod::Tensor t = tmod::tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  CHECK(t.shape() == tmod::Shape{2, 2, 2});
  CHECK(t.dtype() == tmod::DType::int32);
  CHECK(t.at<std::int32_t>({1, 0, 1}) == 6);
  CHECK_THROWS_WITH_AS((void)tmod::tensor({{1.f, 2.f}, {3.f}}),
                       "tensor: ragged nested list: 1 elements at depth 1 where an earlier list had 2",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)tmod::tensor({{{1}, {2}}, {{3}}}),
                       "tensor: ragged nested list: 1 elements at depth 1 where an earlier list had 2",
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)tmod::tensor({{{1, 2}}, {{3}}}),
                       "tensor: ragged nested list: 1 elements at depth 2 where an earlier list had 2",
                       tmod::shape_error);
  CHECK_THROWS_AS((void)tmod::tensor({{{{1.f}}}, {{{2.f, 3.f}}}}), tmod::shape_error);

  const std::vector<float> five(5, 1.f);
  CHECK_THROWS_WITH_AS((void)tmod::tensor(std::span<const float>(five), {2, 3}),
                       "tensor: 5 values do not fill shape (2, 3)", tmod::shape_error);
  CHECK(tmod::tensor(std::span<const float>(five), {5, 1}).shape() == tmod::Shape{5, 1});
}

TEST_CASE("arange: counts, direction, dtype and rejected arguments") {
  const tmod::Tensor a = tmod::arange(0.0, 1.0, 0.3);  // 0, 0.3, 0.6, 0.9
  REQUIRE(a.shape() == tmod::Shape{4});
  CHECK(a.at({3}) == doctest::Approx(0.9));
  const tmod::Tensor down = tmod::arange(5.0, 1.0, -2.0);  // 5, 3
  REQUIRE(down.numel() == 2);
  CHECK(down.at({1}) == 3.f);
  CHECK(tmod::arange(3.0, 1.0).numel() == 0);  // a positive step below start: empty, not negative
  CHECK(tmod::arange(1.0, 1.0).numel() == 0);
  const tmod::Tensor ints = tmod::arange(-2.0, 3.0, 1.0, tmod::DType::int32);
  CHECK(ints.dtype() == tmod::DType::int32);
  CHECK(ints.at<std::int32_t>({0}) == -2);
  CHECK(ints.at<std::int32_t>({4}) == 2);

  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS((void)tmod::arange(0.0, 1.0, 0.0),
                       "arange: start, stop and step must be finite and step non-zero (got start=0.000000, "
                       "stop=1.000000, step=0.000000)",
                       tmod::value_error);
  CHECK_THROWS_AS((void)tmod::arange(0.0, inf), tmod::value_error);
  CHECK_THROWS_AS((void)tmod::arange(nan, 1.0), tmod::value_error);
  CHECK_THROWS_AS((void)tmod::arange(0.0, 1.0, nan), tmod::value_error);
  CHECK_THROWS_AS((void)tmod::arange(nan), tmod::value_error);
}

TEST_CASE("uniform: low must not exceed high; low == high is a constant") {
  CHECK_THROWS_WITH_AS((void)tmod::uniform({3}, 1.f, 0.f),
                       "uniform: low (1.000000) must not exceed high (0.000000)", tmod::value_error);
  CHECK_THROWS_AS((void)tmod::uniform({3}, std::numeric_limits<float>::quiet_NaN(), 1.f), tmod::value_error);
  CHECK_THROWS_AS((void)tmod::uniform({3}, 0.f, std::numeric_limits<float>::quiet_NaN()), tmod::value_error);
  const tmod::Tensor constant = tmod::uniform({16}, 2.5f, 2.5f, 3);
  CHECK(std::ranges::all_of(constant.values<float>(), [](float v) { return v == 2.5f; }));
  CHECK(tmod::uniform({0, 4}, 0.f, 1.f).numel() == 0);
}

TEST_CASE("QParams: carried by the handle, copied by clone and reshape, cleared with nullopt") {
  tmod::Tensor t = tmod::zeros({2, 2});
  CHECK_FALSE(t.qparams().has_value());
  const tmod::QParams q{.dtype_meta = "quint8", .scale = 0.5f, .zero_point = 128};
  t.set_qparams(q);
  REQUIRE(t.qparams().has_value());
  CHECK(*t.qparams() == q);
  CHECK(tmod::QParams{} == tmod::QParams{"qint8", 1.f, 0});
  CHECK_FALSE(*t.qparams() == tmod::QParams{.dtype_meta = "quint8", .scale = 0.5f, .zero_point = 127});

  const tmod::Tensor c = t.clone();
  CHECK(c.qparams() == std::optional<tmod::QParams>(q));
  CHECK_FALSE(c.shares_storage_with(t));
  CHECK(t.reshape({4}).qparams() == std::optional<tmod::QParams>(q));

  t.set_qparams(std::nullopt);
  CHECK_FALSE(t.qparams().has_value());
  CHECK(c.qparams().has_value());  // the clone keeps its own
}

}  // namespace tmod_test_core_tensor
