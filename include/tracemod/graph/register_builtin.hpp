// tmod::register_as_builtin<M>() (MegEngine's tm.register_as_builtin): makes a user module class
// opaque at run time. trace_module and graph surgery then record one CallMethod for its calls (no
// sub-graph), the interpreter runs its forward on tensors, and the class joins nn::builtin_registry,
// the registry save/load rebuilds builtin modules from, so a saved module that holds one loads.
//
//   struct MyNeg : tmod::Module { TM_MODULE(MyNeg) auto forward(const auto& x) const { return F::neg(x); } };
//   tmod::register_as_builtin<MyNeg>();   // once, before tracing (not thread-safe against tracing)
//
// The class must take one or two tensors and return one. Its output shape is found by recording
// its forward on Syms into a scratch graph (nothing is computed); a forward that calls user
// modules of its own cannot be recorded there and runs on zeros instead. The config saved for it
// is an empty dict and load default-constructs it, then assigns the saved tensors; pass `config`
// and `make` for a class whose constructor takes hyper-parameters. The compile-time tracer's
// typed graphs are unaffected: they decide builtin-ness from the type (M::builtin).
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/factories.hpp>
#include <tracemod/graph/graph.hpp>
#include <tracemod/graph/recorder.hpp>
#include <tracemod/graph/sym.hpp>
#include <tracemod/nn/builtin_registry.hpp>

#include <concepts>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace tracemod {

namespace detail {

template <class M>
Tensor registered_call(const M& m, std::span<const Tensor> in) {
  if (in.size() == 1) {
    if constexpr (requires { m.forward(in[0]); }) return Tensor(m.forward(in[0]));
  } else if (in.size() == 2) {
    if constexpr (requires { m.forward(in[0], in[1]); }) return Tensor(m.forward(in[0], in[1]));
  }
  throw module_error(std::string(M::tracemod_type_name) + ": forward does not take " + std::to_string(in.size()) +
                     " tensor" + (in.size() == 1 ? "" : "s"));
}

/// Records `m`'s forward on Syms of `shapes` into a scratch graph (its builtin children resolve
/// through an index of `m`); its output's shape.
template <class M>
Shape registered_infer_by_recording(const M& m, std::span<const Shape> shapes) {
  graph::Graph scratch(std::string(M::tracemod_type_name), std::string(M::tracemod_type_name), nullptr);
  graph::ModuleNode* self = scratch.add_self_input("Module");
  const graph::AttributeIndex index(m);
  std::vector<graph::Sym> in;
  for (const Shape& s : shapes) in.emplace_back(scratch.add_tensor_input("x", s, DType::float32));
  const graph::Recorder r(scratch, self, &m, nullptr, &index);
  if (in.size() == 1) {
    if constexpr (requires { { m.forward(in[0]) } -> std::same_as<graph::Sym>; }) return m.forward(in[0]).shape();
  } else if (in.size() == 2) {
    if constexpr (requires { { m.forward(in[0], in[1]) } -> std::same_as<graph::Sym>; })
      return m.forward(in[0], in[1]).shape();
  }
  throw module_error(std::string(M::tracemod_type_name) + ": forward does not take " + std::to_string(in.size()) +
                     " tensor" + (in.size() == 1 ? "" : "s"));
}

template <class M>
Shape registered_infer_shape(const M& m, std::span<const Shape> shapes) {
  try {
    return registered_infer_by_recording(m, shapes);
  } catch (const graph_error&) {
    // A user module inside the forward needs trace_module's tracer: compute on zeros instead.
    std::vector<Tensor> zs;
    for (const Shape& s : shapes) zs.push_back(zeros(s));
    return registered_call(m, zs).shape();
  }
}

}  // namespace detail

/// Makes user module class M builtin (see the top of this file); `config` gives the hyper-parameters
/// saved with it and `make` rebuilds it from them. Throws value_error if a builtin of M's type
/// name is registered already.
template <class M>
const nn::builtin_entry& register_as_builtin(std::function<Value(const M&)> config = {},
                                             std::function<std::unique_ptr<M>(const Value&)> make = {}) {
  static_assert(reflected_module<M> && !M::builtin,
                "tmod::register_as_builtin<M>: M must be a user module class that declares TM_MODULE(M, ...)");
  const std::string name(M::tracemod_type_name);
  if (!config) config = [](const M&) { return Value::dict({}); };
  if (!make) {
    if constexpr (std::default_initializable<M>)
      make = [](const Value&) { return std::make_unique<M>(); };
    else
      throw value_error("register_as_builtin<" + name + ">: the class is not default-constructible; pass `make`");
  }
  nn::builtin_entry registered;  // no scaling rule and no tensor shapes: the class declares neither
  registered.type_name = name;
  registered.config = [config](const Module& m) { return config(dynamic_cast<const M&>(m)); };
  registered.make = [make](const Value& c) -> std::unique_ptr<Module> { return make(c); };
  const nn::builtin_entry& entry = nn::builtin_registry::instance().add(std::move(registered));
  detail::registered_builtin<M>::infer_shape = &detail::registered_infer_shape<M>;
  detail::registered_builtin<M>::call = &detail::registered_call<M>;
  return entry;
}

}  // namespace tracemod
