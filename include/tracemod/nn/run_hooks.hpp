// Running a module's forward hooks around one call: the pre-hooks on the inputs, then (after
// forward) the forward hooks on the inputs and the output, each in registration order and each
// seeing what the previous one returned. Eager calls (nn/module_call.hpp), the runtime graph's
// interpreter and TracedModule's call operator all run them through here.
//
// Hooks see values (tmod::Value); an eager call converts its arguments and forward's result to
// values and back. A failing hook names itself and the module ("forward hook 1 of Linear: ...");
// an error of another type than tmod::error becomes a module_error with its message.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/core/value.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/nn/hook_handle.hpp>
#include <tracemod/nn/module.hpp>

#include <algorithm>
#include <exception>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::detail {

/// Rethrows `e` as its own class with `prefix` in front of the message.
[[noreturn]] inline void rethrow_with_prefix(const error& e, const std::string& prefix) {
  const std::string what = prefix + e.what();
  if (dynamic_cast<const shape_error*>(&e)) throw shape_error(what);
  if (dynamic_cast<const dtype_error*>(&e)) throw dtype_error(what);
  if (dynamic_cast<const value_error*>(&e)) throw value_error(what);
  if (dynamic_cast<const format_error*>(&e)) throw format_error(what);
  if (dynamic_cast<const graph_error*>(&e)) throw graph_error(what);
  if (dynamic_cast<const module_error*>(&e)) throw module_error(what);
  throw error(what);
}

/// "forward pre-hook 0 of Linear": the position counts the hooks of that kind that ran.
inline std::string hook_label(bool pre, std::size_t index, const Module& m) {
  return std::string(pre ? "forward pre-hook " : "forward hook ") + std::to_string(index) + " of " +
         std::string(m.type_name());
}

/// Calls one hook; whatever it throws leaves as a tmod::error naming the hook and the module.
template <class F>
decltype(auto) call_hook(bool pre, std::size_t index, const Module& m, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    rethrow_with_prefix(e, hook_label(pre, index, m) + ": ");
  } catch (const std::exception& e) {
    throw module_error(hook_label(pre, index, m) + " threw: " + e.what());
  } catch (...) {
    throw module_error(hook_label(pre, index, m) + " threw an exception that is not a std::exception");
  }
}

/// Runs the live pre-hooks; each may replace `inputs`. Returns whether one did.
inline bool run_pre_hooks(const Module& m, const hook_list& hooks, ValueList& inputs) {
  bool replaced = false;
  std::size_t index = 0;
  for (const auto& record : hooks.pre) {
    if (!record->live()) continue;
    std::optional<ValueList> out = call_hook(true, index++, m, [&] { return record->pre(m, inputs); });
    if (out) {
      inputs = std::move(*out);
      replaced = true;
    }
  }
  return replaced;
}

/// Runs the live forward hooks; each may replace `output`.
inline void run_forward_hooks(const Module& m, const hook_list& hooks, std::span<const Value> inputs, Value& output) {
  std::size_t index = 0;
  for (const auto& record : hooks.post) {
    if (!record->live()) continue;
    std::optional<Value> out = call_hook(false, index++, m, [&] { return record->post(m, inputs, output); });
    if (out) output = std::move(*out);
  }
}

/// Whether some hook of the list is live (a module whose hooks were all removed calls forward alone).
inline bool any_live_hook(const hook_list& hooks) noexcept {
  return hook_list::any_live(hooks.pre) || hook_list::any_live(hooks.post);
}

// ---- eager values ------------------------------------------------------------------------------

/// An eager argument as the value hooks see.
template <class A>
Value to_hook_value(const A& a) {
  if constexpr (std::derived_from<A, Tensor>) {
    return Value(Tensor(a));
  } else if constexpr (std::same_as<A, none_t>) {
    return Value(none);
  } else if constexpr (is_constant_scalar_v<A>) {
    return Value(static_cast<float>(a));
  } else if constexpr (std::is_arithmetic_v<A>) {
    return Value(a);
  } else {  // a list of tensors: vector, span or tuple
    ValueList items;
    if constexpr (requires { std::tuple_size<A>::value; })
      std::apply([&](const auto&... t) { (items.emplace_back(Tensor(t)), ...); }, a);
    else
      for (const Tensor& t : a) items.emplace_back(t);
    return Value::list(std::move(items));
  }
}

/// What forward receives for an argument of type A that a pre-hook replaced (a Tensor for any
/// tensor class, a vector for a span of tensors, a float for a tmod::c constant).
template <class A>
using hook_arg_t = std::conditional_t<
    std::derived_from<A, Tensor>, Tensor,
    std::conditional_t<std::same_as<A, std::span<const Tensor>>, std::vector<Tensor>,
                       std::conditional_t<is_constant_scalar_v<A>, float, A>>>;

[[noreturn]] inline void replaced_input_error(const Module& m, std::size_t i, const std::string& want, const Value& got) {
  throw value_error("the forward pre-hooks of " + std::string(m.type_name()) + " replaced input " + std::to_string(i) +
                    " by " + got.repr() + ", where forward takes " + want);
}

/// The argument forward receives from a replaced input value.
template <class A>
hook_arg_t<A> from_hook_value(const Module& m, std::size_t i, const Value& v) {
  using T = hook_arg_t<A>;
  if constexpr (std::same_as<T, Tensor>) {
    if (!v.is_tensor() || !v.tensor().defined()) replaced_input_error(m, i, "a defined tensor", v);
    return v.tensor();
  } else if constexpr (std::same_as<T, none_t>) {
    if (!v.is_none()) replaced_input_error(m, i, "None", v);
    return none;
  } else if constexpr (std::is_integral_v<T>) {
    if (v.kind() != Value::Kind::integer) replaced_input_error(m, i, "an integer", v);
    return static_cast<T>(v.integer());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) replaced_input_error(m, i, "a number", v);
    return static_cast<T>(v.number());
  } else {
    constexpr bool fixed = requires { std::tuple_size<T>::value; };
    const std::size_t want = [] {
      if constexpr (fixed) return std::tuple_size_v<T>;
      else return std::size_t{0};
    }();
    if (!v.is_sequence() || (fixed && v.size() != want) ||
        std::any_of(v.items().begin(), v.items().end(), [](const Value& x) { return !x.is_tensor(); }))
      replaced_input_error(m, i, fixed ? "a list of " + std::to_string(want) + " tensors" : "a list of tensors", v);
    if constexpr (fixed) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) { return T{v[I].tensor()...}; }(
          std::make_index_sequence<std::tuple_size_v<T>>{});
    } else {
      std::vector<Tensor> out;
      for (const Value& x : v.items()) out.push_back(x.tensor());
      return out;
    }
  }
}

/// Whether forward's result converts to a value hooks see (a tensor, or nested tuples, pairs and
/// vectors of tensors).
template <class R>
inline constexpr bool hook_result_v = [] {
  if constexpr (std::derived_from<R, Tensor>) return true;
  else if constexpr (requires { std::tuple_size<R>::value; })
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (hook_result_v<std::remove_cvref_t<std::tuple_element_t<I, R>>> && ...);
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  else if constexpr (requires { typename R::value_type; } && std::same_as<R, std::vector<typename R::value_type>>)
    return hook_result_v<typename R::value_type>;
  else return false;
}();

template <class R>
Value result_to_value(const R& r) {
  if constexpr (std::derived_from<R, Tensor>) {
    return Value(Tensor(r));
  } else if constexpr (requires { std::tuple_size<R>::value; }) {
    return std::apply([](const auto&... x) { return Value::tuple({result_to_value(x)...}); }, r);
  } else {
    ValueList items;
    for (const auto& x : r) items.push_back(result_to_value(x));
    return Value::list(std::move(items));
  }
}

[[noreturn]] inline void replaced_output_error(const Module& m, const Value& got, const std::string& want) {
  throw value_error("the forward hooks of " + std::string(m.type_name()) + " replaced the output by " + got.repr() +
                    ", where forward returns " + want);
}

/// Forward's result type rebuilt from a replaced output value of the same structure.
template <class R>
R result_from_value(const Module& m, const Value& v) {
  if constexpr (std::derived_from<R, Tensor>) {
    if (!v.is_tensor()) replaced_output_error(m, v, "a tensor");
    return R(v.tensor());
  } else if constexpr (requires { std::tuple_size<R>::value; }) {
    constexpr std::size_t n = std::tuple_size_v<R>;
    if (!v.is_sequence() || v.size() != n) replaced_output_error(m, v, "a tuple of " + std::to_string(n));
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return R{result_from_value<std::remove_cvref_t<std::tuple_element_t<I, R>>>(m, v[I])...};
    }(std::make_index_sequence<n>{});
  } else {
    if (!v.is_sequence()) replaced_output_error(m, v, "a list");
    R out;
    for (const Value& x : v.items()) out.push_back(result_from_value<typename R::value_type>(m, x));
    return out;
  }
}

/// Runs forward with the module's live hooks around it (the caller has checked that it has some).
/// Returns what forward returns, by value.
template <class M, class... A>
auto forward_with_hooks(const M& module, const hook_list& hooks, const A&... args)
    -> std::remove_cvref_t<decltype(module.forward(args...))> {
  using R = std::remove_cvref_t<decltype(module.forward(args...))>;
  const bool post = hook_list::any_live(hooks.post);
  if constexpr (!hook_result_v<R>)
    if (post)
      throw module_error(std::string(module.type_name()) +
                         ": forward hooks see tensors and tuples or vectors of them; this forward returns another type");
  ValueList inputs{to_hook_value(args)...};
  const bool replaced = run_pre_hooks(module, hooks, inputs);
  const auto call = [&]() -> R {
    if (!replaced) return module.forward(args...);
    if (inputs.size() != sizeof...(A))
      throw value_error("the forward pre-hooks of " + std::string(module.type_name()) + " returned " +
                        std::to_string(inputs.size()) + " inputs, where forward takes " + std::to_string(sizeof...(A)));
    if constexpr (requires { module.forward(std::declval<const hook_arg_t<A>&>()...); }) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) -> R {
        const std::tuple<hook_arg_t<A>...> decoded{from_hook_value<A>(module, I, inputs[I])...};
        return module.forward(std::get<I>(decoded)...);
      }(std::index_sequence_for<A...>{});
    } else {
      throw module_error(std::string(module.type_name()) +
                         ": forward takes argument types a pre-hook cannot give (declare it on tmod::Tensor)");
    }
  };
  R result = call();
  if constexpr (hook_result_v<R>) {
    if (post) {
      Value output = result_to_value(result);
      run_forward_hooks(module, hooks, inputs, output);
      return result_from_value<R>(module, output);
    }
  }
  return result;
}

}  // namespace tracemod::detail
