// Shared sub-modules (Module::share_module): one object reached by two attributes. The expected
// traversals are PyTorch's for `m.h = m.i` on the same tree (named_modules/parameters once,
// state_dict under both paths); copies keep the sharing inside the copy (deepcopy's memo).
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/reflection.hpp>

#include <doctest/doctest.h>

#include "nn/nn_test.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tmod_test_nn_shared_modules {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

struct Net : tmod::Module {
  M::Linear fc{3, 2};
  TM_MODULE(Net, fc)
};

struct Holder : tmod::Module {
  TM_MODULE(Holder)
};

template <class Named>
std::vector<std::string> names(const Named& items) {
  std::vector<std::string> result;
  for (const auto& item : items) result.push_back(item.first);
  return result;
}

using strings = std::vector<std::string>;
using nn_test::module_error_of;

/// Net with i = Linear(3, 2) added with setattr and h sharing it.
Net shared_net() {
  Net m;
  m.setattr("i", M::Linear(3, 2));
  m.share_module("h", "i");
  return m;
}

float first_weight(tmod::Module& m, const std::string& path) {
  return m.getattr(path + ".weight").tensor().values<float>()[0];
}

}  // namespace

TEST_CASE("share_module: both paths are one object; a weight changed through one is seen through the other") {
  Net m = shared_net();
  CHECK(&m.getattr("h").module() == &m.getattr("i").module());
  m.getattr("h.weight").tensor().values<float>()[0] = 7.f;
  CHECK(first_weight(m, "i") == 7.f);
  m.setattr("i.weight", tmod::Parameter(tmod::full({2, 3}, 3.f)));  // rebinding inside the shared module
  CHECK(first_weight(m, "h") == 3.f);
  // Through the alias into the module: the attribute is added once, seen by both paths.
  m.setattr("h.extra", tmod::Buffer(tmod::ones({1})));
  CHECK(m.has_attr("i.extra"));
}

TEST_CASE("share_module: traversals list a shared module once, state_dict under both paths (PyTorch)") {
  Net m = shared_net();
  // PyTorch: named_modules -> ['', 'fc', 'i'], named_children -> ['fc', 'i'], parameters once.
  CHECK(names(m.named_modules()) == strings{"", "fc", "i"});
  CHECK(names(m.named_modules("", false)) == strings{"", "fc", "i", "h"});
  CHECK(names(m.named_children()) == strings{"fc", "i"});
  CHECK(names(m.named_parameters()) == strings{"fc.weight", "fc.bias", "i.weight", "i.bias"});
  CHECK(m.parameters().size() == 4);
  CHECK(m.modules().size() == 3);
  CHECK(m.state_dict().keys() == strings{"fc.weight", "fc.bias", "i.weight", "i.bias", "h.weight", "h.bias"});
  CHECK(m.repr() ==  // PyTorch prints a shared module under each name
        "Net(\n  (fc): Linear(in_features=3, out_features=2, bias=True)\n"
        "  (i): Linear(in_features=3, out_features=2, bias=True)\n"
        "  (h): Linear(in_features=3, out_features=2, bias=True)\n)");

  // load_state_dict expects every key state_dict gives; the alias's keys land in the one module.
  tmod::StateDict d = m.state_dict();
  tmod::StateDict partial;
  for (const auto& [k, v] : d)
    if (k.rfind("h.", 0) != 0) partial.insert(k, v);
  CHECK(module_error_of([&] { m.load_state_dict(partial); }).find("h.weight") != std::string::npos);
  tmod::StateDict both;
  for (const auto& [k, v] : d) both.insert(k, k == "h.bias" ? tmod::full({2}, 5.f) : v.clone());
  m.load_state_dict(both);
  CHECK(m.getattr("i.bias").tensor().values<float>()[1] == 5.f);
}

TEST_CASE("share_module: copies keep the sharing inside the copy") {
  Net m = shared_net();
  const auto check_copy = [&](tmod::Module& copy) {
    tmod::Module& i = copy.getattr("i").module();
    CHECK(&copy.getattr("h").module() == &i);
    CHECK(&i != &m.getattr("i").module());
  };
  Net copied = m;  // a C++ copy
  check_copy(copied);
  Net assigned;
  assigned = m;
  check_copy(assigned);
  Net cloned = m.clone();  // new tensors as well: the clone's weight is its own, once
  check_copy(cloned);
  cloned.getattr("h.weight").tensor().values<float>()[0] = 9.f;
  CHECK(first_weight(cloned, "i") == 9.f);
  CHECK(first_weight(m, "i") != 9.f);
  const std::unique_ptr<tmod::Module> erased = static_cast<const tmod::Module&>(m).clone();
  check_copy(*erased);
  Holder outer;  // a copy made by setattr
  outer.setattr("net", m);
  CHECK(&outer.getattr("net.h").module() == &outer.getattr("net.i").module());
  CHECK(&outer.getattr("net.i").module() != &m.getattr("i").module());
}

TEST_CASE("share_module: the module lives as long as one of its attributes") {
  Net m = shared_net();
  m.getattr("i.weight").tensor().values<float>()[0] = 4.f;
  m.delattr("i");
  CHECK(first_weight(m, "h") == 4.f);
  CHECK(names(m.named_modules()) == strings{"", "fc", "h"});
  m.share_module("i", "h");
  m.setattr("h", M::ReLU{});  // rebinding one attribute leaves the other holding the module
  CHECK(first_weight(m, "i") == 4.f);
  CHECK(m.getattr("h").module().type_name() == "ReLU");
}

TEST_CASE("share_module: bad input names the paths and changes nothing") {
  Net m = shared_net();
  Holder inner;
  inner.setattr("leaf", M::ReLU{});
  m.setattr("blk", inner);
  const std::vector<std::string> before = names(m.named_modules("", false));

  std::string e = module_error_of([&] { m.share_module("x", "nope"); });
  CHECK(e.find("'nope'") != std::string::npos);
  CHECK(e.find("missing") != std::string::npos);
  e = module_error_of([&] { m.share_module("x", "i.weight"); });
  CHECK(e.find("is a parameter, not a module") != std::string::npos);
  e = module_error_of([&] { m.share_module("x", "fc"); });
  CHECK(e.find("reflected member") != std::string::npos);
  e = module_error_of([&] { m.share_module("fc", "i"); });
  CHECK(e.find("a C++ member cannot become another object") != std::string::npos);
  e = module_error_of([&] { m.share_module("nowhere.x", "i"); });
  CHECK(e.find("'nowhere.x'") != std::string::npos);
  // Cycles: a module aliased as itself below itself, or as a descendant of its own descendant.
  e = module_error_of([&] { m.share_module("blk.self", "blk"); });
  CHECK(e.find("'blk.self' would lie inside 'blk'") != std::string::npos);
  e = module_error_of([&] { m.share_module("blk.leaf.up", "blk"); });
  CHECK(e.find("'blk.leaf.up' would lie inside 'blk'") != std::string::npos);
  CHECK(e.find("'blk.leaf'") != std::string::npos);
  m.share_module("alias_blk", "blk");  // through an alias too
  e = module_error_of([&] { m.share_module("alias_blk.loop", "blk"); });
  CHECK(e.find("would lie inside 'blk'") != std::string::npos);
  m.delattr("alias_blk");
  CHECK(names(m.named_modules("", false)) == before);
  // An alias between siblings is fine.
  m.share_module("blk.i_again", "i");
  CHECK(&m.getattr("blk.i_again").module() == &m.getattr("i").module());
}

}  // namespace tmod_test_nn_shared_modules
