// StateDict and load_state_dict: round trips, strict errors listing every offending key (and
// leaving the module untouched), non-strict reports.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/state_dict.hpp>

#include <doctest/doctest.h>

#include "nn/nn_test.hpp"

#include <string>
#include <vector>

namespace tmod_test_nn_state_dict {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

struct Net : tmod::Module {
  M::Linear fc{3, 2};
  M::BatchNorm2d bn{2};
  TM_MODULE(Net, fc, bn)
};

using nn_test::module_error_of;

bool same_values(const tmod::Tensor& a, const tmod::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (a.dtype() == tmod::DType::float32 ? a.data<float>()[i] != b.data<float>()[i]
                                          : a.data<std::int32_t>()[i] != b.data<std::int32_t>()[i])
      return false;
  return true;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

using strings = std::vector<std::string>;

}  // namespace

TEST_CASE("StateDict: insertion order, lookup and errors") {
  tmod::StateDict d{{"b", tmod::zeros({1})}, {"a", tmod::ones({2})}};
  d.insert("c", tmod::zeros({3}));
  CHECK(d.keys() == strings{"b", "a", "c"});
  CHECK(d.size() == 3);
  CHECK(d.contains("a"));
  CHECK(d.at("a").shape() == tmod::Shape{2});
  CHECK(contains(module_error_of([&] { d.insert("a", tmod::zeros({1})); }), "duplicate key 'a'"));
  CHECK(contains(module_error_of([&] { (void)d.at("zz"); }), "no key 'zz'"));
  d.insert_or_assign("a", tmod::zeros({5}));
  d.insert_or_assign("d", tmod::zeros({4}));
  CHECK(d.keys() == strings{"b", "a", "c", "d"});
  CHECK(d.at("a").shape() == tmod::Shape{5});
  CHECK(d.erase("b"));
  CHECK_FALSE(d.erase("b"));
  CHECK(d.keys() == strings{"a", "c", "d"});
  CHECK(d.at("d").shape() == tmod::Shape{4});  // the index survives an erase before it
  std::string order;
  for (const auto& [key, value] : d) order += key;
  CHECK(order == "acd");
}

TEST_CASE("load_state_dict: copies values into the existing tensors") {
  Net a, b;
  a.bn.num_batches_tracked.data<std::int32_t>()[0] = 11;
  REQUIRE_FALSE(same_values(a.fc.weight, b.fc.weight));
  const tmod::Tensor b_weight = b.fc.weight;
  const tmod::IncompatibleKeys report = b.load_state_dict(a.state_dict());
  CHECK(report.empty());
  for (const auto& entry : a.state_dict())
    CHECK_MESSAGE(same_values(entry.second, b.state_dict().at(entry.first)), entry.first);
  CHECK(b.fc.weight.shares_storage_with(b_weight));  // copied in place, not rebound
  CHECK_FALSE(b.fc.weight.shares_storage_with(a.fc.weight));
  CHECK(b.bn.num_batches_tracked.item<std::int32_t>() == 11);

  // Loading a module's own state (source and destination are the same buffers) is a no-op.
  const tmod::Tensor before = b.fc.bias.clone();
  b.load_state_dict(b.state_dict());
  CHECK(same_values(b.fc.bias, before));
}

TEST_CASE("load_state_dict: strict errors list every offending key and load nothing") {
  Net a, b;
  tmod::StateDict d = a.state_dict();
  d.erase("fc.bias");
  d.erase("bn.running_var");
  d.insert("fc.scale", tmod::ones({2}));
  d.insert_or_assign("bn.weight", tmod::ones({3}));
  d.insert_or_assign("bn.num_batches_tracked", tmod::zeros(tmod::Shape{}));  // float32, expected int32
  const tmod::Tensor before = b.fc.weight.clone();

  const std::string e = module_error_of([&] { b.load_state_dict(d); });
  CHECK(contains(e, "load_state_dict: errors in loading the state dict of Net:"));
  CHECK(contains(e, "missing keys: 'fc.bias', 'bn.running_var'"));
  CHECK(contains(e, "unexpected keys: 'fc.scale'"));
  CHECK(contains(e, "'bn.weight' is (2,) float32 in the module but (3,) float32 in the state dict"));
  CHECK(contains(e, "'bn.num_batches_tracked' is () int32 in the module but () float32 in the state dict"));
  CHECK(same_values(b.fc.weight, before));  // fc.weight was loadable, but a failed strict load changes nothing

  CHECK(contains(module_error_of([&] { b.load_state_dict({}); }), "missing keys: 'fc.weight', 'fc.bias', 'bn.weight'"));
  tmod::StateDict extra = b.state_dict();
  extra.insert("head.weight", tmod::zeros({1}));
  const std::string only_unexpected = module_error_of([&] { b.load_state_dict(extra); });
  CHECK(contains(only_unexpected, "unexpected keys: 'head.weight'"));
  CHECK_FALSE(contains(only_unexpected, "missing"));
}

TEST_CASE("load_state_dict: non-strict loads what matches and reports the rest") {
  Net a, b;
  tmod::StateDict d = a.state_dict();
  d.erase("bn.bias");
  d.insert("other", tmod::zeros({1}));
  d.insert_or_assign("fc.bias", tmod::ones({5}));
  const tmod::Tensor b_bias = b.fc.bias.clone();

  const tmod::IncompatibleKeys r = b.load_state_dict(d, false);
  CHECK(r.missing_keys == strings{"bn.bias"});
  CHECK(r.unexpected_keys == strings{"other"});
  CHECK(r.mismatched_keys == strings{"fc.bias"});
  CHECK_FALSE(r.empty());
  CHECK(same_values(b.fc.weight, a.fc.weight));
  CHECK(same_values(b.bn.running_mean, a.bn.running_mean));
  CHECK(same_values(b.fc.bias, b_bias));
}

TEST_CASE("load_state_dict: undefined tensors are neither saved nor expected") {
  M::Linear no_bias(3, 2, false);
  CHECK(no_bias.state_dict().keys() == strings{"weight"});
  M::BatchNorm2d plain(4, {.affine = false, .track_running_stats = false});
  CHECK(plain.state_dict().empty());
  CHECK(plain.load_state_dict({}).empty());
  M::Linear with_bias(3, 2);
  const tmod::IncompatibleKeys r = no_bias.load_state_dict(with_bias.state_dict(), false);
  CHECK(r.unexpected_keys == strings{"bias"});
  CHECK(same_values(no_bias.weight, with_bias.weight));
}

}  // namespace tmod_test_nn_state_dict
