// TM_MODULE's compile-time reflection: member names, counts, kinds, pointers, the hana::Struct
// model, the builtin trait, and the run-time identity it generates.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/tensor_methods.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/constant.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/elemwise.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/fused.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/pooling.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>

#include <boost/hana/at.hpp>
#include <boost/hana/at_key.hpp>
#include <boost/hana/keys.hpp>
#include <boost/hana/length.hpp>

#include <doctest/doctest.h>

#include <string_view>
#include <type_traits>

namespace tmod_test_nn_reflection {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
namespace hana = boost::hana;

// The example of DESIGN.md.
struct SimpleModule : tmod::Module {
  M::Linear linear{4, 5};
  tmod::Parameter param{tmod::tensor({1.f})};
  TM_MODULE(SimpleModule, linear, param)
  auto forward(const auto& x) const {
    auto a = x + tmod::constant({1.f});
    auto r = F::relu(a);
    return linear(r + param);
  }
};

struct WithBufferAndAbsent : tmod::Module {
  tmod::Buffer steps{tmod::zeros({1})};
  tmod::none_t missing;
  M::ReLU act;
  int not_listed = 3;  // ordinary members stay out of TM_MODULE
  TM_MODULE(WithBufferAndAbsent, steps, missing, act)
  auto forward(const auto& x) const { return act(x); }
};

struct Empty : tmod::Module {
  TM_MODULE(Empty)
  auto forward(const auto& x) const { return x; }
};

// A user subclass of a builtin is a user module (MegEngine: exact type decides), and lists the
// inherited members it reflects.
struct MyLinear : M::Linear {
  tmod::Parameter scale{tmod::ones({3})};
  MyLinear() : M::Linear(2, 3) {}
  TM_MODULE(MyLinear, weight, bias, scale)
  auto forward(const auto& x) const { return M::Linear::forward(x) * scale; }
};

constexpr auto simple = tmod::members_of<SimpleModule>();
static_assert(hana::length(simple) == hana::size_c<2>);
static_assert(hana::at_c<0>(simple).name == "linear");
static_assert(hana::at_c<1>(simple).name == "param");
static_assert(hana::at_c<0>(simple).kind == tmod::member_kind::module);
static_assert(hana::at_c<1>(simple).kind == tmod::member_kind::parameter);
static_assert(hana::at_c<0>(simple).pointer == &SimpleModule::linear);
static_assert(std::is_same_v<std::remove_cvref_t<decltype(hana::at_c<0>(simple))>::value_type, M::Linear>);
static_assert(hana::at_c<1>(simple).hana_name == BOOST_HANA_STRING("param"));

constexpr auto with_buffer = tmod::members_of<WithBufferAndAbsent>();
static_assert(hana::length(with_buffer) == hana::size_c<3>);
static_assert(hana::at_c<0>(with_buffer).kind == tmod::member_kind::buffer);
static_assert(hana::at_c<1>(with_buffer).kind == tmod::member_kind::none);
static_assert(hana::at_c<1>(with_buffer).name == "missing");
static_assert(hana::at_c<2>(with_buffer).kind == tmod::member_kind::module);

static_assert(hana::length(tmod::members_of<Empty>()) == hana::size_c<0>);

constexpr auto my_linear = tmod::members_of<MyLinear>();
static_assert(hana::length(my_linear) == hana::size_c<3>);
static_assert(hana::at_c<0>(my_linear).name == "weight" && hana::at_c<2>(my_linear).name == "scale");

// Builtin members, with PyTorch's names and order.
constexpr auto bn = tmod::members_of<M::BatchNorm2d>();
static_assert(hana::length(bn) == hana::size_c<5>);
static_assert(hana::at_c<0>(bn).name == "weight" && hana::at_c<1>(bn).name == "bias" &&
              hana::at_c<2>(bn).name == "running_mean" && hana::at_c<3>(bn).name == "running_var" &&
              hana::at_c<4>(bn).name == "num_batches_tracked");
static_assert(hana::at_c<1>(bn).kind == tmod::member_kind::parameter &&
              hana::at_c<2>(bn).kind == tmod::member_kind::buffer);
static_assert(hana::length(tmod::members_of<M::MaxPool2d>()) == hana::size_c<0>);
static_assert(hana::at_c<1>(tmod::members_of<M::ConvBn2d>()).name == "bn");

// Sequential: children "0", "1", ... up to two digits.
using Seq = M::Sequential<M::Conv2d, M::BatchNorm2d, M::ReLU>;
constexpr auto seq = tmod::members_of<Seq>();
static_assert(hana::length(seq) == hana::size_c<3>);
static_assert(hana::at_c<0>(seq).name == "0" && hana::at_c<2>(seq).name == "2");
static_assert(std::is_same_v<std::remove_cvref_t<decltype(hana::at_c<1>(seq))>::value_type, M::BatchNorm2d>);
static_assert(tmod::detail::index_name<12>().view() == "12");
static_assert(tmod::detail::index_name<0>().view() == "0");
static_assert(hana::length(tmod::members_of<M::ModuleList<M::ReLU>>()) == hana::size_c<0>);

// Builtin (opaque to the tracer) vs user modules.
static_assert(M::is_builtin_module_v<M::Linear> && M::is_builtin_module_v<M::Conv2d> &&
              M::is_builtin_module_v<M::BatchNorm2d> && M::is_builtin_module_v<M::ReLU> &&
              M::is_builtin_module_v<M::MaxPool2d> && M::is_builtin_module_v<M::AvgPool2d> &&
              M::is_builtin_module_v<M::AdaptiveAvgPool2d> && M::is_builtin_module_v<M::Identity> &&
              M::is_builtin_module_v<M::Flatten> && M::is_builtin_module_v<M::Dropout> &&
              M::is_builtin_module_v<M::Elemwise> && M::is_builtin_module_v<M::ConvBn2d> &&
              M::is_builtin_module_v<M::ConvBnRelu2d>);
static_assert(!M::is_builtin_module_v<SimpleModule> && !M::is_builtin_module_v<Seq> &&
              !M::is_builtin_module_v<M::ModuleList<M::ReLU>> && !M::is_builtin_module_v<MyLinear>);
static_assert(!M::is_builtin_module_v<int> && !M::is_builtin_module_v<tmod::Tensor>);

// Reflection is exact: a subclass without its own TM_MODULE is not reflected.
struct Unreflected : M::ReLU {};
static_assert(tmod::reflected_module<M::ReLU> && !tmod::reflected_module<Unreflected>);
static_assert(!tmod::reflected_module<tmod::Tensor>);

// Every builtin provides infer_shape, which the tracer uses instead of running it.
template <class T>
concept infers_shape = requires(const T& m, const tmod::Shape& s) {
  { m.infer_shape(s) } -> std::same_as<tmod::Shape>;
};
static_assert(infers_shape<M::Linear> && infers_shape<M::Conv2d> && infers_shape<M::BatchNorm2d> &&
              infers_shape<M::ReLU> && infers_shape<M::MaxPool2d> && infers_shape<M::AvgPool2d> &&
              infers_shape<M::AdaptiveAvgPool2d> && infers_shape<M::Identity> && infers_shape<M::Flatten> &&
              infers_shape<M::Dropout> && infers_shape<M::Elemwise> && infers_shape<M::ConvBn2d> &&
              infers_shape<M::ConvBnRelu2d>);

}  // namespace

TEST_CASE("TM_MODULE: descriptors reach the members of an instance") {
  SimpleModule m;
  CHECK(&hana::at_c<0>(simple).get(m) == &m.linear);
  CHECK(&hana::at_c<1>(simple)(m) == &m.param);
  const SimpleModule& cm = m;
  CHECK(&hana::at_c<1>(simple).get(cm) == &m.param);
  MyLinear ml;
  CHECK(&hana::at_c<0>(my_linear).get(ml) == &ml.weight);
}

TEST_CASE("TM_MODULE: a reflected module is a hana::Struct") {
  SimpleModule m;
  CHECK(&hana::at_key(m, BOOST_HANA_STRING("linear")) == &m.linear);
  CHECK(&hana::at_key(m, BOOST_HANA_STRING("param")) == &m.param);
  constexpr auto expected = hana::make_tuple(BOOST_HANA_STRING("linear"), BOOST_HANA_STRING("param"));
  static_assert(decltype(hana::keys(m) == expected)::value);
}

TEST_CASE("TM_MODULE: type_name is the class name as written, is_builtin the trait") {
  SimpleModule s;
  WithBufferAndAbsent w;
  Seq q(M::Conv2d(1, 1, 1), M::BatchNorm2d(1), M::ReLU());
  MyLinear ml;
  CHECK(s.type_name() == "SimpleModule");
  CHECK(w.type_name() == "WithBufferAndAbsent");
  CHECK(q.type_name() == "Sequential");
  CHECK(M::ModuleList<M::ReLU>().type_name() == "ModuleList");
  CHECK(ml.type_name() == "MyLinear");
  CHECK(M::Conv2d(1, 1, 1).type_name() == "Conv2d");
  CHECK(M::ConvBnRelu2d(1, 1, 1).type_name() == "ConvBnRelu2d");
  const tmod::Module& base = ml;
  CHECK(base.type_name() == "MyLinear");
  CHECK_FALSE(base.is_builtin());
  CHECK(static_cast<const tmod::Module&>(M::Linear(1, 1)).is_builtin());
  CHECK_FALSE(static_cast<const tmod::Module&>(q).is_builtin());
}

TEST_CASE("TM_MODULE: the call operator runs forward eagerly") {
  SimpleModule m;
  tmod::Tensor x = tmod::tensor({{-3.f, -0.5f, 0.f, 2.f}, {1.f, 1.f, 1.f, 1.f}});
  tmod::Tensor y = m(x);
  REQUIRE(y.shape() == tmod::Shape{2, 5});
  // Independent reference: relu(x + 1) + param, then x @ W^T + b by hand.
  const float* w = m.linear.weight.data<float>();
  const float* b = m.linear.bias.data<float>();
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t o = 0; o < 5; ++o) {
      double acc = b[o];
      for (std::int64_t i = 0; i < 4; ++i) acc += (std::max(x.at({r, i}) + 1.f, 0.f) + 1.f) * w[o * 4 + i];
      CHECK(y.at({r, o}) == doctest::Approx(acc).epsilon(1e-5));
    }
  // A user subclass of a builtin runs its own forward.
  MyLinear ml;
  ml.scale = tmod::tensor({1.f, 2.f, -3.f});
  tmod::Tensor z = ml(tmod::tensor({{0.5f, -1.f}}));
  REQUIRE(z.shape() == tmod::Shape{1, 3});
  for (std::int64_t o = 0; o < 3; ++o) {
    const double lin = ml.bias.at({o}) + 0.5 * ml.weight.at({o, 0}) - 1.0 * ml.weight.at({o, 1});
    CHECK(z.at({0, o}) == doctest::Approx(lin * ml.scale.at({o})).epsilon(1e-5));
  }
}

}  // namespace tmod_test_nn_reflection
