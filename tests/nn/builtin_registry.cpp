// The builtin-module registry is generated from the modules: every class declaring TM_BUILTIN_MODULE
// is registered, and each module's config() and from_config() round-trip and reject bad configs.
#include <tracemod/nn/builtin_registry.hpp>
#include <tracemod/quant/qconfig.hpp>

#include <doctest/doctest.h>

#include "nn/library_builtins.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace tmod_test_nn_builtin_registry {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;

std::string value_error_of(const M::builtin_entry& e, const tmod::Value& config) {
  try {
    (void)e.make(config);
  } catch (const tmod::value_error& error) {
    return error.what();
  }
  return "(built)";
}

}  // namespace

TEST_CASE("builtin registry: the registered types are the classes declaring TM_BUILTIN_MODULE") {
  const std::set<std::string> declared = library_builtins::declared_in_headers();
  for (const char* name : {"Conv2d", "BatchNorm2d", "Linear", "ReLU", "ReLU6", "Identity", "MaxPool2d", "AvgPool2d",
                           "AdaptiveAvgPool2d", "Flatten", "Elemwise", "Dropout", "ConvBn2d", "ConvBnRelu2d", "GELU", "SiLU",
                           "Hardswish", "Hardsigmoid", "LeakyReLU", "LayerNorm", "GroupNorm", "Upsample"})
    CHECK_MESSAGE(declared.contains(name), name);
  const std::vector<std::string> names = M::builtin_registry::instance().type_names();
  const std::set<std::string> registered(names.begin(), names.end());
  CHECK(registered.size() == names.size());
  CHECK(registered == declared);
}

TEST_CASE("builtin registry: config -> from_config -> config round-trips for every module type") {
  std::vector<std::unique_ptr<tmod::Module>> samples;
  samples.push_back(std::make_unique<M::Conv2d>(4, 6, tmod::functional::pair2{3, 1},
                                                M::Conv2dOptions{.stride = 2, .padding = {1, 0}, .dilation = {1, 2},
                                                                 .groups = 2, .bias = false}));
  samples.push_back(std::make_unique<M::BatchNorm2d>(5, M::BatchNorm2dOptions{.eps = 1e-3, .momentum = std::nullopt}));
  samples.push_back(std::make_unique<M::Linear>(7, 2, false));
  samples.push_back(std::make_unique<M::LayerNorm>(tmod::functional::int_list{3, 4}, 1e-3));
  samples.push_back(std::make_unique<M::GroupNorm>(2, 6, 1e-4));
  samples.push_back(std::make_unique<M::ReLU>());
  samples.push_back(std::make_unique<M::ReLU6>());
  samples.push_back(std::make_unique<M::GELU>("tanh"));
  samples.push_back(std::make_unique<M::SiLU>());
  samples.push_back(std::make_unique<M::Hardswish>());
  samples.push_back(std::make_unique<M::Hardsigmoid>());
  samples.push_back(std::make_unique<M::LeakyReLU>(0.2));
  samples.push_back(std::make_unique<M::Identity>());
  samples.push_back(std::make_unique<M::MaxPool2d>(3, M::MaxPool2dOptions{.stride = 2, .padding = 1, .ceil_mode = true}));
  samples.push_back(std::make_unique<M::AvgPool2d>(2, M::AvgPool2dOptions{.count_include_pad = false}));
  samples.push_back(std::make_unique<M::AdaptiveAvgPool2d>(tmod::functional::pair2{3, 2}));
  samples.push_back(std::make_unique<M::Flatten>(2, 3));
  samples.push_back(std::make_unique<M::Upsample>(tmod::functional::interpolate_params{.scale_factor = 1.5, .mode = "bilinear",
                                                                                     .align_corners = true}));
  samples.push_back(std::make_unique<M::Upsample>(tmod::functional::pair2{5, 7}));
  samples.push_back(std::make_unique<M::ChannelShuffle>(4));
  samples.push_back(std::make_unique<M::Embedding>(6, 3, -2));
  samples.push_back(std::make_unique<M::Embedding>(5, 2));
  samples.push_back(std::make_unique<M::Elemwise>("fuse_add_tanh"));
  samples.push_back(std::make_unique<M::Dropout>(0.125));
  samples.push_back(std::make_unique<M::ConvBn2d>(2, 4, 1, M::Conv2dOptions{.bias = false},
                                                  M::BatchNorm2dOptions{.affine = false}));
  samples.push_back(std::make_unique<M::ConvBnRelu2d>(3, 3, 3, M::Conv2dOptions{.padding = 1, .groups = 3},
                                                      M::BatchNorm2dOptions{.track_running_stats = false}));
  samples.push_back(std::make_unique<M::FakeQuantize>(tracemod::quant::ema_fakequant_qconfig.activation()));
  auto calibrated = std::make_unique<M::FakeQuantize>(tracemod::quant::calibration_qconfig.activation());
  (void)calibrated->forward(tmod::tensor({-1.5f, 0.25f, 2.f}));  // the config holds what it observed
  samples.push_back(std::move(calibrated));
  std::set<std::string> covered;
  for (const auto& m : samples) {
    CAPTURE(m->type_name());
    const M::builtin_entry* e = M::builtin_registry::instance().find(m->type_name());
    REQUIRE(e != nullptr);
    covered.insert(e->type_name);
    const tmod::Value config = e->config(*m);
    const std::unique_ptr<tmod::Module> rebuilt = e->make(config);
    CHECK(rebuilt->type_name() == m->type_name());
    CHECK(e->config(*rebuilt) == config);
    CHECK(rebuilt->extra_repr() == m->extra_repr());
    if (e->tensor_shapes) {
      // The module built by its constructor has the shapes its config gives.
      const auto shapes = e->tensor_shapes(*m);
      CHECK(!shapes.empty());
      for (const auto& [name, shape] : shapes) CHECK_MESSAGE(m->state_dict().at(name).shape() == shape, name);
      CHECK(e->tensor_shapes(*rebuilt) == shapes);
    }
  }
  const std::vector<std::string> names = M::builtin_registry::instance().type_names();
  CHECK(covered == std::set<std::string>(names.begin(), names.end()));
}

TEST_CASE("builtin registry: the config keys saved files hold") {
  const auto keys = [](const tmod::Value& config) {
    std::vector<std::string> k;
    for (const auto& [key, v] : config.dict_items()) k.push_back(key);
    return k;
  };
  CHECK(keys(M::Conv2d(1, 1, 1).config()) == std::vector<std::string>{"in_channels", "out_channels", "kernel_size",
                                                                       "stride", "padding", "dilation", "groups",
                                                                       "bias"});
  CHECK(keys(M::BatchNorm2d(1).config()) ==
        std::vector<std::string>{"num_features", "eps", "momentum", "affine", "track_running_stats"});
  CHECK(keys(M::Linear(1, 1).config()) == std::vector<std::string>{"in_features", "out_features", "bias"});
  CHECK(keys(M::LayerNorm(4).config()) == std::vector<std::string>{"normalized_shape", "eps", "elementwise_affine"});
  CHECK(keys(M::Upsample(tmod::functional::pair2{2, 3}).config()) ==
        std::vector<std::string>{"size", "scale_factor", "mode", "align_corners"});
  CHECK(keys(M::GroupNorm(2, 4).config()) == std::vector<std::string>{"num_groups", "num_channels", "eps", "affine"});
  CHECK(keys(M::MaxPool2d(2).config()) ==
        std::vector<std::string>{"kernel_size", "stride", "padding", "dilation", "ceil_mode"});
  CHECK(keys(M::AvgPool2d(2).config()) ==
        std::vector<std::string>{"kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"});
  CHECK(keys(M::Flatten().config()) == std::vector<std::string>{"start_axis", "end_axis"});
  CHECK(keys(M::ConvBnRelu2d(1, 1, 1).config()) == std::vector<std::string>{"conv", "bn"});
  CHECK(M::Elemwise("add").config() == tmod::Value::dict({{"method", std::string("ADD")}}));
  CHECK(M::Dropout(0.25).config() == tmod::Value::dict({{"p", 0.25}}));
  CHECK(M::ReLU6().config() == tmod::Value::dict({}));
  CHECK(M::GELU().config() == tmod::Value::dict({{"approximate", std::string("none")}}));
  CHECK(M::LeakyReLU().config() == tmod::Value::dict({{"negative_slope", 0.01}}));
  CHECK(M::SiLU().config() == tmod::Value::dict({}));
  CHECK(M::ChannelShuffle(3).config() == tmod::Value::dict({{"groups", std::int64_t{3}}}));
  CHECK(keys(M::Embedding(4, 2, 1).config()) == std::vector<std::string>{"num_embeddings", "embedding_dim", "padding_idx"});
  CHECK(M::Embedding(4, 2, -1).config().dict_items()[2].second == tmod::Value(std::int64_t{3}));
  CHECK(M::Embedding(4, 2).config().dict_items()[2].second.is_none());
  CHECK_THROWS_AS(M::GELU("erf"), tmod::value_error);
}

TEST_CASE("builtin registry: from_config rejects a bad config with value_error naming the module and field") {
  const auto& r = M::builtin_registry::instance();
  const tmod::Value conv = M::Conv2d(4, 8, 3).config();
  tmod::ValueDict missing;
  for (const auto& [k, v] : conv.dict_items())
    if (k != "groups") missing.emplace_back(k, v);
  CHECK(value_error_of(*r.find("Conv2d"), tmod::Value::dict(std::move(missing))) ==
        "Conv2d: the config has no field 'groups'");
  tmod::ValueDict wrong = conv.dict_items();
  for (auto& [k, v] : wrong)
    if (k == "stride") v = tmod::Value(std::string("two"));
  CHECK(value_error_of(*r.find("Conv2d"), tmod::Value::dict(std::move(wrong))).starts_with(
      "Conv2d: parameter 'stride' must be an integer or a pair of integers"));
  CHECK(value_error_of(*r.find("Linear"), tmod::Value(std::int64_t{3})).starts_with(
      "Linear: the config must be a dict"));
  CHECK(value_error_of(*r.find("MaxPool2d"), tmod::Value::dict({{"kernel_size", std::int64_t{2}}})) ==
        "MaxPool2d: the config has no field 'stride'");
  CHECK(value_error_of(*r.find("Elemwise"), tmod::Value::dict({{"method", std::int64_t{1}}})).starts_with(
      "Elemwise: parameter 'method' must be a string"));
  CHECK(value_error_of(*r.find("ConvBn2d"), tmod::Value::dict({{"conv", conv}})) ==
        "ConvBn2d: the config has no field 'bn'");
  CHECK(value_error_of(*r.find("BatchNorm2d"), M::BatchNorm2d(2).config()) == "(built)");
}

}  // namespace tmod_test_nn_builtin_registry
