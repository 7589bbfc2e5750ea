// ModuleDict and containers of several module classes (ModuleList<A, B>, ModuleVariant): the dict
// API with PyTorch's semantics (insertion order, replacement in place, update, pop), paths and
// state_dict keys, eager forwards that index and loop over mixed containers (checked against the
// children called one by one), and the errors for a missing key, a bad key and an index out of range.
#include <tracemod/core/factories.hpp>
#include <tracemod/functional/elementwise.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_dict.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>

#include <doctest/doctest.h>

#include "nn/nn_test.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace tmod_test_nn_containers {

namespace {

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace M = tracemod::nn;
using nn_test::module_error_of;
using strings = std::vector<std::string>;

template <class V>
strings names(const V& named) {
  strings s;
  for (const auto& entry : named) s.push_back(entry.first);
  return s;
}

bool same_values(const tmod::Tensor& a, const tmod::Tensor& b) {
  return a.shape() == b.shape() && std::ranges::equal(a.values<float>(), b.values<float>());
}

/// y = fc(x) * 2.
struct Doubled : tmod::Module {
  M::Linear fc;
  explicit Doubled(std::int64_t n) : fc(n, n) {}
  TM_MODULE(Doubled, fc)
  auto forward(const auto& x) const { return fc(x) * 2.f; }
};

/// A dict and a list, each of three classes, indexed and looped over in forward.
struct Net : tmod::Module {
  M::ModuleDict<M::Linear, Doubled, M::ReLU> blocks{{"proj", M::Linear(4, 6)}, {"act", M::ReLU{}}, {"mix", Doubled(6)}};
  M::ModuleList<Doubled, M::ReLU, M::Linear> layers{Doubled(6), M::ReLU{}, M::Linear(6, 3)};
  TM_MODULE(Net, blocks, layers)
  auto forward(const auto& x) const {
    auto y = blocks["proj"](x);
    y = blocks["act"](y);
    y = blocks["mix"](y);
    for (const auto& layer : layers) y = layer(y);
    return y;
  }
};

/// Looks up a key that the dict does not have.
struct MissingKey : tmod::Module {
  M::ModuleDict<M::ReLU> acts{{"a", M::ReLU{}}, {"b", M::ReLU{}}};
  TM_MODULE(MissingKey, acts)
  auto forward(const auto& x) const { return acts["c"](x); }
};

/// Indexes past the end of its list.
struct PastTheEnd : tmod::Module {
  M::ModuleList<M::ReLU, M::Linear> layers{M::ReLU{}, M::Linear(2, 2)};
  TM_MODULE(PastTheEnd, layers)
  auto forward(const auto& x) const { return layers.at(2)(x); }
};

}  // namespace

TEST_CASE("ModuleDict: keys in insertion order, lookup, insert, insert_or_assign, update, pop") {
  M::ModuleDict<M::Linear> d{{"b", M::Linear(2, 3)}, {"a", M::Linear(3, 4)}};
  CHECK(d.size() == 2);
  CHECK(d.keys() == strings{"b", "a"});
  CHECK(d.contains("a"));
  CHECK_FALSE(d.contains("c"));
  CHECK(d["a"].out_features == 4);
  CHECK(d.at("b").in_features == 2);

  d.insert("c", M::Linear(4, 5));
  CHECK(d.keys() == strings{"b", "a", "c"});
  CHECK(module_error_of([&] { d.insert("a", M::Linear(1, 1)); }).find("key 'a' is already taken") != std::string::npos);
  CHECK(d["a"].out_features == 4);  // the failed insert changed nothing

  d.insert_or_assign("b", M::Linear(7, 8));  // replaced where it stands, as PyTorch's d[key] = m
  CHECK(d.keys() == strings{"b", "a", "c"});
  CHECK(d["b"].in_features == 7);

  d.update({{"c", M::Linear(9, 9)}, {"z", M::Linear(1, 2)}});
  CHECK(d.keys() == strings{"b", "a", "c", "z"});
  CHECK(d["c"].in_features == 9);
  CHECK(module_error_of([&] { d.update({{"y", M::Linear(1, 1)}, {"bad.key", M::Linear(1, 1)}}); })
            .find("key 'bad.key' is not an attribute name") != std::string::npos);
  CHECK_FALSE(d.contains("y"));  // every key is checked before anything changes

  const M::Linear popped = d.pop("a");
  CHECK(popped.out_features == 4);
  CHECK(d.keys() == strings{"b", "c", "z"});
  CHECK(module_error_of([&] { (void)d.pop("a"); }) == "ModuleDict cannot pop key 'a' (its keys: 'b', 'c', 'z')");

  strings seen;
  for (const auto& [key, fc] : d) seen.push_back(key + ":" + std::to_string(fc.out_features));
  CHECK(seen == strings{"b:8", "c:9", "z:2"});
  CHECK(d.values().size() == 3);
  CHECK(d.items().front().first == "b");
  d.clear();
  CHECK(d.empty());
  CHECK(module_error_of([&] { (void)d["b"]; }) == "ModuleDict has no key 'b' (its keys: none)");
  CHECK(module_error_of([&] { d.insert("", M::Linear(1, 1)); }).find("key '' is not an attribute name") !=
        std::string::npos);
  CHECK(module_error_of([&] { d.insert("1x", M::Linear(1, 1)); }).find("key '1x'") != std::string::npos);
  d.insert("0", M::Linear(1, 1));  // digits name a child, as in a ModuleList
  CHECK(d.keys() == strings{"0"});
}

TEST_CASE("ModuleDict: children, paths, state_dict keys and load_state_dict follow the keys") {
  Net m;
  CHECK(names(m.named_modules()) == strings{"", "blocks", "blocks.proj", "blocks.act", "blocks.mix", "blocks.mix.fc",
                                            "layers", "layers.0", "layers.0.fc", "layers.1", "layers.2"});
  CHECK(names(m.state_dict()) == strings{"blocks.proj.weight", "blocks.proj.bias", "blocks.mix.fc.weight",
                                         "blocks.mix.fc.bias", "layers.0.fc.weight", "layers.0.fc.bias",
                                         "layers.2.weight", "layers.2.bias"});
  CHECK(&m.getattr("blocks.mix").as<Doubled>() == &m.blocks["mix"].get<Doubled>());
  CHECK(&m.getattr("layers.2").module() == &m.layers[2].module());
  CHECK(m.blocks.type_name() == "ModuleDict");
  CHECK_FALSE(m.blocks.is_builtin());

  Net other;
  other.load_state_dict(m.state_dict());
  const tmod::Tensor x = tmod::randn({2, 4}, 3);
  CHECK(same_values(other(x), m(x)));

  Net copy = m.clone();
  CHECK_FALSE(copy.blocks["proj"].get<M::Linear>().weight.shares_storage_with(m.blocks["proj"].get<M::Linear>().weight));
  CHECK(same_values(copy(x), m(x)));
}

TEST_CASE("ModuleList and ModuleDict of several classes: eager forward equals the children called one by one") {
  tmod::manual_seed(5);
  Net m;
  const tmod::Tensor x = tmod::randn({2, 4}, 4);
  const auto& proj = m.blocks["proj"].get<M::Linear>();
  const auto& mix = m.blocks["mix"].get<Doubled>();
  const auto& doubled = m.layers[0].get<Doubled>();
  const auto& head = m.layers[2].get<M::Linear>();
  const tmod::Tensor y1 = F::relu(F::linear(x, proj.weight, proj.bias));
  const tmod::Tensor y2 = F::linear(y1, mix.fc.weight, mix.fc.bias) * 2.f;
  const tmod::Tensor y3 = F::relu(F::linear(y2, doubled.fc.weight, doubled.fc.bias) * 2.f);
  const tmod::Tensor expected = F::linear(y3, head.weight, head.bias);
  CHECK(same_values(m(x), expected));

  CHECK(m.layers[1].holds<M::ReLU>());
  CHECK(m.layers[1].type_name() == "ReLU");
  CHECK(module_error_of([&] { (void)m.layers[1].get<M::Linear>(); }) ==
        "ModuleVariant::get: the element is a ReLU, not a Linear");
  m.layers.append(M::ReLU{});
  m.layers.extend({Doubled(3), M::Linear(3, 2)});
  CHECK(m.layers.size() == 6);
  CHECK(m.layers.at(5).holds<M::Linear>());
  CHECK(m.getattr("layers.4.fc").as<M::Linear>().in_features == 3);
}

TEST_CASE("ModuleDict and ModuleList errors name the container's path in the module whose forward runs") {
  MissingKey m;
  const tmod::Tensor x = tmod::zeros({1, 2});
  CHECK(module_error_of([&] { (void)m(x); }) ==
        "MissingKey: ModuleDict 'acts' in MissingKey has no key 'c' (its keys: 'a', 'b')");
  PastTheEnd p;
  CHECK(module_error_of([&] { (void)p(x); }) ==
        "PastTheEnd: ModuleList 'layers' in PastTheEnd: index 2 is out of range for 2 modules");
  // Outside any forward the container names only its class.
  CHECK(module_error_of([&] { (void)p.layers.at(7); }) == "ModuleList: index 7 is out of range for 2 modules");
}

}  // namespace tmod_test_nn_containers
