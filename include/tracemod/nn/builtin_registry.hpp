// The registry of builtin modules by type name: for each, its constructor config as a Value dict
// (declared once, here, next to the modules) and a factory that rebuilds the module from that config.
// The serializer saves builtin modules as (type name, config, tensors) and rebuilds them on load, so
// a loading program needs no module class of the user. Modules made builtin later (tmod::wrap,
// register_as_builtin) join with builtin_registry::instance().add(...).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/param_value.hpp>
#include <tracemod/functional/registry.hpp>
#include <tracemod/nn/activation.hpp>
#include <tracemod/nn/batch_norm.hpp>
#include <tracemod/nn/conv.hpp>
#include <tracemod/nn/dropout.hpp>
#include <tracemod/nn/elemwise.hpp>
#include <tracemod/nn/flatten.hpp>
#include <tracemod/nn/fused.hpp>
#include <tracemod/nn/identity.hpp>
#include <tracemod/nn/linear.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/pooling.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod::nn {

/// One builtin module type.
struct builtin_entry {
  std::string type_name;  ///< Module::type_name()
  /// The module's constructor config (hyper-parameters only; tensors are saved separately).
  std::function<Value(const Module&)> config;
  /// A module of this type built from a config. Tensors may be left at any size: the caller replaces
  /// every tensor with the saved one. Throws value_error on a config that does not fit.
  std::function<std::unique_ptr<Module>(const Value&)> make;
  /// How a call commutes with scaling its input, from the module's `scaling` (none if it has none).
  functional::scale_rule scaling = functional::scale_rule::none;
  /// The shape each named tensor must have for the module's config (load checks the saved tensors
  /// against it); empty for modules whose tensors the config does not size.
  std::function<std::vector<std::pair<std::string, Shape>>(const Module&)> tensor_shapes;
  /// The module's ONNX export rule (functional/onnx_rule.hpp), from its `onnx_export` member; null
  /// for a module without an ONNX equivalent. `path` is the module's attribute path.
  std::function<void(functional::onnx_export_context&, const Module&, const std::string& path)> onnx_export;
};

class builtin_registry {
 public:
  static builtin_registry& instance() {
    static builtin_registry* r = new builtin_registry;  // never destroyed, like the op registry
    return *r;
  }
  [[nodiscard]] const builtin_entry* find(std::string_view type_name) const {
    const std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
      if (e->type_name == type_name) return e.get();
    return nullptr;
  }
  /// Every registered type name, in registration order.
  [[nodiscard]] std::vector<std::string> type_names() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> v;
    for (const auto& e : entries_) v.push_back(e->type_name);
    return v;
  }
  /// Adds a type; throws value_error if the name is taken.
  const builtin_entry& add(builtin_entry e) {
    const std::lock_guard lock(mutex_);
    for (const auto& x : entries_)
      if (x->type_name == e.type_name) throw value_error("builtin module '" + e.type_name + "' is already registered");
    entries_.push_back(std::make_unique<builtin_entry>(std::move(e)));
    return *entries_.back();
  }

 private:
  builtin_registry();
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<builtin_entry>> entries_;
};

namespace detail {

/// A config field as type T, or value_error naming the module and the field.
template <class T>
T config_field(const Value& config, std::string_view module, std::string_view field) {
  return functional::from_value<T>(config.at(field), module, field);
}

/// An op's params struct as a config dict (the op's own field names) and back.
template <class Op>
Value params_config(const typename Op::params& p) {
  ValueDict d;
  functional::for_each_param<Op>(p, [&](std::string_view name, const auto& v, bool) {
    d.emplace_back(std::string(name), functional::to_value(v));
  });
  return Value::dict(std::move(d));
}
template <class Op>
typename Op::params params_from_config(const Value& config) {
  const functional::op_entry& e = functional::entry_of<Op>();
  std::vector<Value> values;
  for (const functional::param_spec& s : e.params) values.push_back(config.at(s.name));
  return *static_cast<const typename Op::params*>(e.make_params(values).get());
}

inline Value conv_config(const Conv2d& m) {
  using functional::to_value;
  return Value::dict({{"in_channels", m.in_channels}, {"out_channels", m.out_channels},
                      {"kernel_size", to_value(m.kernel_size)}, {"stride", to_value(m.stride)},
                      {"padding", to_value(m.padding)}, {"dilation", to_value(m.dilation)},
                      {"groups", m.groups}, {"bias", m.bias.defined()}});
}
/// Sets a Conv2d's hyper-parameters from a config. The module is built at 1x1 size (its constructor
/// validates stride, padding, dilation and bias) so that no weight of the configured size is
/// allocated or initialised: the saved tensors replace them.
inline void apply_conv_config(Conv2d& m, const Value& c) {
  using functional::pair2;
  const auto in = config_field<std::int64_t>(c, "Conv2d", "in_channels");
  const auto out = config_field<std::int64_t>(c, "Conv2d", "out_channels");
  const auto groups = config_field<std::int64_t>(c, "Conv2d", "groups");
  const auto kernel = config_field<pair2>(c, "Conv2d", "kernel_size");
  Conv2d checked(1, 1, 1,
                 {.stride = config_field<pair2>(c, "Conv2d", "stride"),
                  .padding = config_field<pair2>(c, "Conv2d", "padding"),
                  .dilation = config_field<pair2>(c, "Conv2d", "dilation"),
                  .groups = 1,
                  .bias = config_field<bool>(c, "Conv2d", "bias")});
  if (in < 0 || out < 0 || groups < 1 || in % groups != 0 || out % groups != 0 || kernel.h < 1 || kernel.w < 1)
    throw value_error("Conv2d: in_channels=" + std::to_string(in) + ", out_channels=" + std::to_string(out) +
                      ", groups=" + std::to_string(groups) + ", kernel_size=" + functional::repr(kernel) +
                      " is no valid configuration");
  checked.in_channels = in;
  checked.out_channels = out;
  checked.groups = groups;
  checked.kernel_size = kernel;
  m = std::move(checked);
}

/// The tensor shapes a config implies (the constructors' allocations), by tensor name.
using tensor_shape_list = std::vector<std::pair<std::string, Shape>>;
inline tensor_shape_list conv_tensor_shapes(const Conv2d& m, const std::string& prefix = "") {
  const std::int64_t groups = m.groups > 0 ? m.groups : 1;
  tensor_shape_list v{{prefix + "weight", Shape{m.out_channels, m.in_channels / groups, m.kernel_size.h, m.kernel_size.w}}};
  if (m.bias.defined()) v.emplace_back(prefix + "bias", Shape{m.out_channels});
  return v;
}
inline tensor_shape_list bn_tensor_shapes(const BatchNorm2d& m, const std::string& prefix = "") {
  tensor_shape_list v;
  if (m.weight.defined()) v.emplace_back(prefix + "weight", Shape{m.num_features});
  if (m.bias.defined()) v.emplace_back(prefix + "bias", Shape{m.num_features});
  if (m.running_mean.defined()) v.emplace_back(prefix + "running_mean", Shape{m.num_features});
  if (m.running_var.defined()) v.emplace_back(prefix + "running_var", Shape{m.num_features});
  if (m.num_batches_tracked.defined()) v.emplace_back(prefix + "num_batches_tracked", Shape{});
  return v;
}
template <class M, class F>
std::function<tensor_shape_list(const Module&)> shapes_of(F f) {
  return [f](const Module& m) { return f(dynamic_cast<const M&>(m)); };
}

inline Value bn_config(const BatchNorm2d& m) {
  return Value::dict({{"num_features", m.num_features}, {"eps", m.eps},
                      {"momentum", m.momentum ? Value(*m.momentum) : Value(none)}, {"affine", m.affine},
                      {"track_running_stats", m.track_running_stats}});
}
inline void apply_bn_config(BatchNorm2d& m, const Value& c) {
  const auto features = config_field<std::int64_t>(c, "BatchNorm2d", "num_features");
  BatchNorm2d checked(0, {.eps = config_field<double>(c, "BatchNorm2d", "eps"),
                          .momentum = config_field<std::optional<double>>(c, "BatchNorm2d", "momentum"),
                          .affine = config_field<bool>(c, "BatchNorm2d", "affine"),
                          .track_running_stats = config_field<bool>(c, "BatchNorm2d", "track_running_stats")});
  if (features < 0) throw value_error("BatchNorm2d: num_features " + std::to_string(features) + " is negative");
  checked.num_features = features;
  m = std::move(checked);
}

template <class M>
builtin_entry entry(std::string name, Value (*config)(const M&), std::unique_ptr<Module> (*make)(const Value&)) {
  builtin_entry e;
  e.type_name = std::move(name);
  e.config = [config, n = e.type_name](const Module& m) {
    const auto* typed = dynamic_cast<const M*>(&m);
    if (typed == nullptr) throw module_error("builtin registry: a " + std::string(m.type_name()) + " is no " + n);
    return config(*typed);
  };
  e.make = make;
  if constexpr (requires { M::scaling; }) e.scaling = M::scaling;
  if constexpr (requires(const M& m, functional::onnx_export_context& cx) { m.onnx_export(cx, std::string()); })
    e.onnx_export = [](functional::onnx_export_context& cx, const Module& m, const std::string& path) {
      dynamic_cast<const M&>(m).onnx_export(cx, path);
    };
  return e;
}

}  // namespace detail

inline builtin_registry::builtin_registry() {
  using detail::config_field;
  using detail::entry;
  using detail::params_config;
  using detail::params_from_config;
  using functional::pair2;
  const auto add = [&](builtin_entry e) { entries_.push_back(std::make_unique<builtin_entry>(std::move(e))); };
  const auto sized = [](builtin_entry e, std::function<detail::tensor_shape_list(const Module&)> shapes) {
    e.tensor_shapes = std::move(shapes);
    return e;
  };
  add(sized(entry<Conv2d>("Conv2d", &detail::conv_config, [](const Value& c) -> std::unique_ptr<Module> {
              auto m = std::make_unique<Conv2d>(1, 1, 1);
              detail::apply_conv_config(*m, c);
              return m;
            }),
            detail::shapes_of<Conv2d>([](const Conv2d& m) { return detail::conv_tensor_shapes(m); })));
  add(sized(entry<BatchNorm2d>("BatchNorm2d", &detail::bn_config, [](const Value& c) -> std::unique_ptr<Module> {
              auto m = std::make_unique<BatchNorm2d>(0);
              detail::apply_bn_config(*m, c);
              return m;
            }),
            detail::shapes_of<BatchNorm2d>([](const BatchNorm2d& m) { return detail::bn_tensor_shapes(m); })));
  add(sized(entry<Linear>(
                "Linear",
                [](const Linear& m) {
                  return Value::dict({{"in_features", m.in_features}, {"out_features", m.out_features},
                                      {"bias", m.bias.defined()}});
                },
                [](const Value& c) -> std::unique_ptr<Module> {
                  auto m = std::make_unique<Linear>(1, 1, config_field<bool>(c, "Linear", "bias"));  // replaced on load
                  m->in_features = config_field<std::int64_t>(c, "Linear", "in_features");
                  m->out_features = config_field<std::int64_t>(c, "Linear", "out_features");
                  if (m->in_features < 0 || m->out_features < 0) throw value_error("Linear: negative feature count");
                  return m;
                }),
            detail::shapes_of<Linear>([](const Linear& m) {
              detail::tensor_shape_list v{{"weight", Shape{m.out_features, m.in_features}}};
              if (m.bias.defined()) v.emplace_back("bias", Shape{m.out_features});
              return v;
            })));
  add(entry<ReLU>(
      "ReLU", [](const ReLU&) { return Value::dict({}); },
      [](const Value&) -> std::unique_ptr<Module> { return std::make_unique<ReLU>(); }));
  add(entry<ReLU6>(
      "ReLU6", [](const ReLU6&) { return Value::dict({}); },
      [](const Value&) -> std::unique_ptr<Module> { return std::make_unique<ReLU6>(); }));
  add(entry<Identity>(
      "Identity", [](const Identity&) { return Value::dict({}); },
      [](const Value&) -> std::unique_ptr<Module> { return std::make_unique<Identity>(); }));
  add(entry<MaxPool2d>(
      "MaxPool2d", [](const MaxPool2d& m) { return params_config<functional::max_pool2d_fn>(m.params); },
      [](const Value& c) -> std::unique_ptr<Module> {
        auto m = std::make_unique<MaxPool2d>(pair2{1});
        m->params = params_from_config<functional::max_pool2d_fn>(c);
        return m;
      }));
  add(entry<AvgPool2d>(
      "AvgPool2d", [](const AvgPool2d& m) { return params_config<functional::avg_pool2d_fn>(m.params); },
      [](const Value& c) -> std::unique_ptr<Module> {
        auto m = std::make_unique<AvgPool2d>(pair2{1});
        m->params = params_from_config<functional::avg_pool2d_fn>(c);
        return m;
      }));
  add(entry<AdaptiveAvgPool2d>(
      "AdaptiveAvgPool2d",
      [](const AdaptiveAvgPool2d& m) { return Value::dict({{"output_size", functional::to_value(m.output_size)}}); },
      [](const Value& c) -> std::unique_ptr<Module> {
        return std::make_unique<AdaptiveAvgPool2d>(config_field<pair2>(c, "AdaptiveAvgPool2d", "output_size"));
      }));
  add(entry<Flatten>(
      "Flatten", [](const Flatten& m) { return params_config<functional::flatten_fn>(m.params); },
      [](const Value& c) -> std::unique_ptr<Module> {
        auto m = std::make_unique<Flatten>();
        m->params = params_from_config<functional::flatten_fn>(c);
        return m;
      }));
  add(entry<Elemwise>(
      "Elemwise", [](const Elemwise& m) { return Value::dict({{"method", std::string(m.method())}}); },
      [](const Value& c) -> std::unique_ptr<Module> {
        const Value& method = c.at("method");
        if (method.kind() != Value::Kind::string) throw value_error("Elemwise: 'method' must be a string");
        return std::make_unique<Elemwise>(method.string());
      }));
  add(entry<Dropout>(
      "Dropout", [](const Dropout& m) { return Value::dict({{"p", m.p}}); },
      [](const Value& c) -> std::unique_ptr<Module> {
        return std::make_unique<Dropout>(config_field<double>(c, "Dropout", "p"));
      }));
  const auto fused = [&]<class F>(std::string name) {
    add(sized(entry<F>(
        std::move(name),
        [](const F& m) { return Value::dict({{"conv", detail::conv_config(m.conv)}, {"bn", detail::bn_config(m.bn)}}); },
        [](const Value& c) -> std::unique_ptr<Module> {
          auto m = std::make_unique<F>(1, 1, 1);
          detail::apply_conv_config(m->conv, c.at("conv"));
          detail::apply_bn_config(m->bn, c.at("bn"));
          return m;
        }),
        detail::shapes_of<F>([](const F& m) {
          detail::tensor_shape_list v = detail::conv_tensor_shapes(m.conv, "conv.");
          for (auto& s : detail::bn_tensor_shapes(m.bn, "bn.")) v.push_back(std::move(s));
          return v;
        })));
  };
  fused.template operator()<ConvBn2d>("ConvBn2d");
  fused.template operator()<ConvBnRelu2d>("ConvBnRelu2d");
}

}  // namespace tracemod::nn
