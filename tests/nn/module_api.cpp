// The run-time Module API: traversal order and paths (checked against PyTorch's for the same tree),
// aliasing, train/eval, dynamic attributes and their errors, copies and clones, repr.
#include <tracemod/core/factories.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module_list.hpp>
#include <tracemod/nn/reflection.hpp>
#include <tracemod/nn/sequential.hpp>

#include <doctest/doctest.h>

#include "nn/nn_test.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tmod_test_nn_module_api {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

struct Inner : tmod::Module {
  M::Linear fc{3, 2};
  tmod::Buffer count{tmod::zeros({1})};
  TM_MODULE(Inner, fc, count)
};

// The same tree in PyTorch gives the orders asserted below (see each test).
struct Outer : tmod::Module {
  tmod::Parameter scale{tmod::ones({2})};
  M::Sequential<Inner, M::ReLU> body;
  M::BatchNorm2d bn{2};
  M::Linear head{2, 4, false};
  TM_MODULE(Outer, scale, body, bn, head)
};

struct WithAbsent : tmod::Module {
  M::ReLU act;
  tmod::none_t missing;
  TM_MODULE(WithAbsent, act, missing)
};

template <class Named>
std::vector<std::string> names(const Named& items) {
  std::vector<std::string> result;
  for (const auto& item : items) result.push_back(item.first);
  return result;
}

std::vector<std::string> keys(const tmod::StateDict& d) { return d.keys(); }

using nn_test::module_error_of;

using strings = std::vector<std::string>;

}  // namespace

TEST_CASE("Module: traversal order and dotted paths match PyTorch") {
  Outer m;
  CHECK(names(m.named_parameters()) == strings{"scale", "body.0.fc.weight", "body.0.fc.bias", "bn.weight", "bn.bias",
                                               "head.weight"});
  CHECK(names(m.named_buffers()) ==
        strings{"body.0.count", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(keys(m.state_dict()) == strings{"scale", "body.0.count", "body.0.fc.weight", "body.0.fc.bias", "bn.weight",
                                        "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                                        "head.weight"});
  CHECK(names(m.named_tensors()) == keys(m.state_dict()));
  CHECK(names(m.named_modules()) == strings{"", "body", "body.0", "body.0.fc", "body.1", "bn", "head"});
  CHECK(names(m.named_children()) == strings{"body", "bn", "head"});

  CHECK(names(m.named_parameters("net")) == strings{"net.scale", "net.body.0.fc.weight", "net.body.0.fc.bias",
                                                    "net.bn.weight", "net.bn.bias", "net.head.weight"});
  CHECK(names(m.named_parameters("", false)) == strings{"scale"});
  CHECK(names(m.named_buffers("", false)).empty());
  CHECK(names(m.named_modules("net")) ==
        strings{"net", "net.body", "net.body.0", "net.body.0.fc", "net.body.1", "net.bn", "net.head"});

  CHECK(m.parameters().size() == 6);
  CHECK(m.parameters(false).size() == 1);
  CHECK(m.buffers().size() == 4);
  CHECK(m.tensors().size() == 10);
  CHECK(m.children().size() == 3);
  CHECK(m.modules().size() == 7);
  CHECK(&m.children()[2].get() == &m.head);
  CHECK(&m.modules()[3].get() == &m.body.get<0>().fc);

  const Outer& cm = m;
  CHECK(names(cm.named_parameters()) == names(m.named_parameters()));
  CHECK(&cm.parameters()[0].get() == &m.scale);
}

TEST_CASE("Module: traversal results alias the module's own tensors") {
  Outer m;
  for (auto& [name, p] : m.named_parameters())
    if (name == "bn.bias") p.data<float>()[1] = 7.f;
  CHECK(m.bn.bias.at({1}) == 7.f);
  m.parameters()[0].get().data<float>()[0] = -2.f;
  CHECK(m.scale.at({0}) == -2.f);
  tmod::StateDict sd = m.state_dict();
  CHECK(sd.at("bn.running_var").shares_storage_with(m.bn.running_var));
  sd.at("body.0.count").data<float>()[0] = 3.f;  // writing through a state_dict entry changes the module
  CHECK(m.body.get<0>().count.at({0}) == 3.f);
}

TEST_CASE("Module: train and eval set every module's flag") {
  Outer m;
  CHECK(m.training());
  m.eval();
  for (const auto& entry : m.named_modules()) CHECK_MESSAGE(!entry.second.training(), entry.first);
  CHECK(&m.train() == &m);
  for (const auto& entry : m.named_modules()) CHECK_MESSAGE(entry.second.training(), entry.first);
  m.body.train(false);
  CHECK(m.training());
  CHECK_FALSE(m.body.get<0>().fc.training());
  CHECK(m.bn.training());
}

TEST_CASE("Module: getattr reaches reflected members through dotted paths") {
  Outer m;
  CHECK(&m.getattr("body.0.fc").as<M::Linear>() == &m.body.get<0>().fc);
  CHECK(&m.getattr("body.0.fc").module() == &m.body.get<0>().fc);
  CHECK(m.getattr("body.1").module().type_name() == "ReLU");
  CHECK(&m.getattr("body.0.fc.weight").parameter() == &m.body.get<0>().fc.weight);
  CHECK(&m.getattr("bn.running_mean").buffer() == &m.bn.running_mean);
  CHECK(&m.getattr("scale").as<tmod::Tensor>() == &m.scale);
  CHECK(m.getattr("bn.num_batches_tracked").kind() == tmod::member_kind::buffer);
  CHECK(m.getattr("head.bias").is_tensor());  // an undefined parameter is still an attribute
  CHECK_FALSE(m.getattr("head.bias").tensor().defined());
  CHECK(m.getattr("body.0").as<tmod::Module>().type_name() == "Inner");
  const Outer& cm = m;
  const M::Linear& head = cm.getattr("head").as<M::Linear>();
  CHECK(head.out_features == 4);

  CHECK(m.has_attr("body.0.fc.bias"));
  CHECK(m.has_attr("head"));
  CHECK_FALSE(m.has_attr("body.2"));
  CHECK_FALSE(m.has_attr("scale.x"));
  CHECK_FALSE(m.has_attr(""));
  CHECK_FALSE(m.has_attr("body..0"));

  WithAbsent w;
  CHECK(w.has_attr("missing"));
  CHECK(w.getattr("missing").is_none());
  CHECK(names(w.named_children()) == strings{"act"});
}

TEST_CASE("Module: getattr errors name the path and what is there") {
  Outer m;
  std::string e = module_error_of([&] { (void)m.getattr("body.5.fc"); });
  CHECK(e.find("getattr('body.5.fc')") != std::string::npos);
  CHECK(e.find("Sequential 'body' has no attribute '5'") != std::string::npos);

  e = module_error_of([&] { (void)m.getattr("heads"); });
  CHECK(e.find("Outer (the root) has no attribute 'heads' (it has: scale, body, bn, head)") != std::string::npos);

  e = module_error_of([&] { (void)m.getattr("scale.data"); });
  CHECK(e.find("'scale' is a parameter, not a module") != std::string::npos);

  e = module_error_of([&] { (void)m.getattr("body.0.fc").as<M::BatchNorm2d>(); });
  CHECK(e.find("getattr('body.0.fc'): the attribute is a Linear module, not a BatchNorm2d") != std::string::npos);

  e = module_error_of([&] { (void)m.getattr("bn.weight").buffer(); });
  CHECK(e.find("the attribute is a parameter, not a buffer") != std::string::npos);
  e = module_error_of([&] { (void)m.getattr("bn").tensor(); });
  CHECK(e.find("is a BatchNorm2d module, not a tensor") != std::string::npos);
  e = module_error_of([&] { (void)m.getattr("bn.weight").module(); });
  CHECK(e.find("not a module") != std::string::npos);

  CHECK(module_error_of([&] { (void)m.getattr(""); }).find("the path is empty") != std::string::npos);
  CHECK(module_error_of([&] { (void)m.getattr("body..0"); }).find("empty component") != std::string::npos);
  CHECK(module_error_of([&] { (void)m.getattr("body."); }).find("empty component") != std::string::npos);

  WithAbsent w;
  e = module_error_of([&] { (void)w.getattr("missing").module(); });
  CHECK(e.find("none (an absent optional member)") != std::string::npos);
}

TEST_CASE("Module: setattr adds dynamic children and tensors that every traversal sees") {
  Outer m;
  m.setattr("extra", M::ReLU{});
  m.setattr("body.0.gain", tmod::Parameter(tmod::tensor({2.f})));
  m.setattr("body.0.stat", tmod::tensor({5.f, 6.f}));  // a plain tensor becomes a buffer
  m.setattr("body.0.fc.mask", tmod::Buffer(tmod::ones({2})));

  CHECK(names(m.named_children()) == strings{"body", "bn", "head", "extra"});
  CHECK(names(m.named_modules()) == strings{"", "body", "body.0", "body.0.fc", "body.1", "bn", "head", "extra"});
  CHECK(names(m.named_parameters()) == strings{"scale", "body.0.gain", "body.0.fc.weight", "body.0.fc.bias",
                                               "bn.weight", "bn.bias", "head.weight"});
  CHECK(keys(m.state_dict()) == strings{"scale", "body.0.gain", "body.0.count", "body.0.stat", "body.0.fc.weight",
                                        "body.0.fc.bias", "body.0.fc.mask", "bn.weight", "bn.bias",
                                        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                                        "head.weight"});
  CHECK(m.getattr("extra").as<M::ReLU>().type_name() == "ReLU");
  CHECK(m.getattr("body.0.stat").kind() == tmod::member_kind::buffer);
  CHECK(m.getattr("body.0.stat").tensor().at({1}) == 6.f);

  // Replacing a dynamic attribute may change its kind.
  m.setattr("extra", M::Identity{});
  CHECK(m.getattr("extra").module().type_name() == "Identity");
  m.setattr("extra", tmod::Parameter(tmod::zeros({3})));
  CHECK(m.getattr("extra").kind() == tmod::member_kind::parameter);
  CHECK(names(m.named_children()) == strings{"body", "bn", "head"});

  // Digits name container-style children.
  m.setattr("body.0.7", M::ReLU{});
  CHECK(m.has_attr("body.0.7"));

  m.delattr("extra");
  m.delattr("body.0.stat");
  CHECK_FALSE(m.has_attr("extra"));
  CHECK_FALSE(m.state_dict().contains("body.0.stat"));
}

TEST_CASE("Module: setattr on a reflected member replaces its value and keeps its type and kind") {
  Outer m;
  M::Linear replacement(2, 7);
  const tmod::Tensor w = replacement.weight;
  m.setattr("head", std::move(replacement));
  CHECK(m.head.out_features == 7);
  CHECK(m.head.weight.shares_storage_with(w));
  CHECK(m.state_dict().at("head.bias").shape() == tmod::Shape{7});

  m.setattr("scale", tmod::zeros({3}));  // a plain tensor bound to a reflected Parameter stays a parameter
  CHECK(m.scale.shape() == tmod::Shape{3});
  CHECK(names(m.named_parameters("", false)) == strings{"scale"});

  M::ReLU relu;
  m.setattr("body.1", relu);  // same type: accepted (lvalues are copied)
  CHECK(m.getattr("body.1").module().type_name() == "ReLU");
}

TEST_CASE("Module: setattr and delattr errors name the path") {
  Outer m;
  std::string e = module_error_of([&] { m.setattr("head", M::ReLU{}); });
  CHECK(e.find("setattr('head')") != std::string::npos);
  CHECK(e.find("the reflected member is a Linear and its C++ type is fixed; it cannot hold a ReLU") !=
        std::string::npos);

  e = module_error_of([&] { m.setattr("bn.weight", M::ReLU{}); });
  CHECK(e.find("setattr('bn.weight'): the reflected member is a parameter; it cannot hold a ReLU module") !=
        std::string::npos);
  e = module_error_of([&] { m.setattr("bn", tmod::zeros({2})); });
  CHECK(e.find("setattr('bn'): the reflected member is a BatchNorm2d module; it cannot hold a tensor") !=
        std::string::npos);
  e = module_error_of([&] { m.setattr("nothere.x", M::ReLU{}); });
  CHECK(e.find("setattr('nothere.x'): Outer (the root) has no attribute 'nothere'") != std::string::npos);
  e = module_error_of([&] { m.setattr("bad-name", M::ReLU{}); });
  CHECK(e.find("'bad-name' is not a valid attribute name") != std::string::npos);
  e = module_error_of([&] { m.setattr("1abc", tmod::zeros({1})); });
  CHECK(e.find("'1abc' is not a valid attribute name") != std::string::npos);

  WithAbsent w;
  e = module_error_of([&] { w.setattr("missing", M::ReLU{}); });
  CHECK(e.find("setattr('missing')") != std::string::npos);
  e = module_error_of([&] { w.setattr("missing", tmod::zeros({1})); });
  CHECK(e.find("declared tmod::none_t") != std::string::npos);

  e = module_error_of([&] { m.delattr("head"); });
  CHECK(e.find("delattr('head'): 'head' is a reflected member of Outer") != std::string::npos);
  e = module_error_of([&] { m.delattr("body.0.nothing"); });
  CHECK(e.find("delattr('body.0.nothing'): Inner has no attribute 'nothing'") != std::string::npos);
  CHECK_THROWS_AS(m.delattr("x.y"), tmod::module_error);
}

TEST_CASE("Module: a copy has its own module tree and shares tensor buffers") {
  Outer m;
  m.setattr("extra", M::Linear(1, 1));
  Outer copy = m;
  CHECK(copy.scale.shares_storage_with(m.scale));
  CHECK(copy.getattr("extra.weight").tensor().shares_storage_with(m.getattr("extra.weight").tensor()));
  CHECK(&copy.getattr("extra").module() != &m.getattr("extra").module());
  copy.setattr("extra", M::ReLU{});  // structure is independent
  CHECK(m.getattr("extra").module().type_name() == "Linear");
  copy.eval();
  CHECK(m.training());

  Outer moved = std::move(copy);
  CHECK(moved.getattr("extra").module().type_name() == "ReLU");
  CHECK_FALSE(moved.training());
  copy = moved;  // assignment of a moved-from module
  CHECK(copy.getattr("extra").module().type_name() == "ReLU");
}

TEST_CASE("Module: clone copies the data, keeps tied tensors tied, and keeps dynamic attributes") {
  Outer m;
  m.setattr("tied", tmod::Parameter(m.scale));
  m.setattr("extra", M::Linear(2, 2));
  m.eval();

  Outer c = m.clone();
  CHECK_FALSE(c.training());
  CHECK(c.type_name() == "Outer");
  const auto original = m.state_dict(), cloned = c.state_dict();
  REQUIRE(original.keys() == cloned.keys());
  for (const auto& entry : original) {
    const tmod::Tensor& t = entry.second;
    const tmod::Tensor& u = cloned.at(entry.first);
    CHECK_MESSAGE(!u.shares_storage_with(t), entry.first);
    REQUIRE(u.shape() == t.shape());
    if (t.dtype() == tmod::DType::float32)
      for (std::int64_t i = 0; i < t.numel(); ++i) CHECK(u.data<float>()[i] == t.data<float>()[i]);
  }
  CHECK(c.getattr("tied").tensor().shares_storage_with(c.scale));
  CHECK_FALSE(c.getattr("tied").tensor().shares_storage_with(m.scale));

  c.scale.data<float>()[0] = 42.f;
  CHECK(m.scale.at({0}) == 1.f);

  const tmod::Module& base = m;
  std::unique_ptr<tmod::Module> p = base.clone();
  CHECK(p->type_name() == "Outer");
  CHECK(dynamic_cast<Outer*>(p.get()) != nullptr);
  CHECK_FALSE(p->state_dict().at("extra.weight").shares_storage_with(m.getattr("extra.weight").tensor()));
  CHECK(p->has_attr("tied"));
}

TEST_CASE("Module: ModuleList children are named by index") {
  M::ModuleList<M::Linear> list{M::Linear(2, 3), M::Linear(3, 4)};
  list.append(M::Linear(4, 1, false));
  CHECK(list.size() == 3);
  CHECK(names(list.named_parameters()) == strings{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight"});
  CHECK(&list.getattr("1").as<M::Linear>() == &list[1]);
  CHECK(list.at(2).out_features == 1);
  CHECK(module_error_of([&] { (void)list.at(3); }).find("index 3 is out of range for 3 modules") != std::string::npos);
  std::int64_t total = 0;
  for (const M::Linear& l : list) total += l.out_features;
  CHECK(total == 8);
  M::ModuleList<M::Linear> c = list.clone();
  CHECK_FALSE(c[0].weight.shares_storage_with(list[0].weight));
  list.setattr("0", M::Linear(5, 5));
  CHECK(list[0].in_features == 5);
}

TEST_CASE("Module: repr prints the tree in PyTorch's format") {
  M::Sequential seq{M::Linear(2, 3), M::ReLU{}};
  CHECK(seq.repr() == "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)");
  Outer m;
  const std::string r = m.repr();
  CHECK(r.find(
            "Outer(\n  (body): Sequential(\n    (0): Inner(\n      (fc): Linear(in_features=3, out_features=2, "
            "bias=True)\n    )\n    (1): ReLU()\n  )\n  (bn): BatchNorm2d(2, eps=1e-05, momentum=0.1, "
            "affine=True, track_running_stats=True)\n  (head): Linear(in_features=2, out_features=4, bias=False)\n)") ==
        0);
}

}  // namespace tmod_test_nn_module_api
