// TM_MODULE: compile-time reflection of a module's members, and the run-time Module API on top of it.
//
//   struct Block : tmod::Module {
//     M::Conv2d conv{8, 8, 3, {.padding = 1}};
//     tmod::Parameter scale{tmod::ones({1})};
//     TM_MODULE(Block, conv, scale)
//     auto forward(const auto& x) const { return conv(x) * scale; }
//   };
//
// TM_MODULE(Class, members...) lists the members that are child modules, tmod::Parameter or
// tmod::Buffer (or tmod::none_t: an absent optional child). It generates
//   - tmod::members_of<Class>(): a boost::hana::tuple of member_descriptor, one per member, with its
//     name, member pointer and kind, usable in constant expressions;
//   - the overrides behind the run-time Module API (type_name(), traversal, copies);
//   - operator(), which runs forward() eagerly or hands symbolic arguments to the tracer;
//   - Class clone() const (a deep copy of the concrete type);
//   - a model of hana::Struct (hana::keys, hana::at_key(m, BOOST_HANA_STRING("conv")), ...).
// A listed member of any other type is rejected by one static_assert naming the fix. The macro
// leaves the declarations that follow it public.
//
// TM_BUILTIN_MODULE does the same for builtin modules: they are opaque to the tracer (recorded as
// one call, like MegEngine's builtin module list) and provide `Shape infer_shape(...) const`. A
// builtin module also describes itself for save and load: `tmod::Value config() const` and
// `static Class from_config(const tmod::Value&)` (a static_assert names them when missing), and
// optionally `static constexpr scale_rule scaling` and `tensor_shape_list tensor_shapes() const`.
// The macro registers the class in nn::builtin_registry (nn/builtin_registration.hpp) before main().
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/meta.hpp>
#include <tracemod/core/none.hpp>
#include <tracemod/nn/builtin_registration.hpp>
#include <tracemod/nn/member_kind.hpp>
#include <tracemod/nn/module.hpp>
#include <tracemod/nn/module_call.hpp>
#include <tracemod/nn/parameter.hpp>

#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/preprocessor/punctuation/comma_if.hpp>
#include <boost/preprocessor/seq/for_each_i.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>

#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace tracemod {

namespace detail {

/// A string literal usable as a template argument (a member name).
template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N]) {  // NOLINT: implicit so "name" converts
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  [[nodiscard]] static constexpr std::size_t size() noexcept { return N - 1; }
  [[nodiscard]] constexpr std::string_view view() const noexcept { return {data, N - 1}; }
};

/// "0", "1", ..., "12": the member name of a container's I-th child.
template <std::size_t I>
constexpr auto index_name() {
  constexpr std::size_t digits = [] {
    std::size_t d = 1;
    for (std::size_t v = I; v >= 10; v /= 10) ++d;
    return d;
  }();
  fixed_string<digits + 1> s;
  std::size_t v = I;
  for (std::size_t k = digits; k-- > 0; v /= 10) s.data[k] = static_cast<char>('0' + v % 10);
  return s;
}

template <fixed_string S, std::size_t... I>
constexpr auto to_hana_string(std::index_sequence<I...>) {
  return boost::hana::string_c<S.data[I]...>;
}

}  // namespace detail

/// A module class that declares TM_MODULE itself (not only through a base class).
template <class T>
concept reflected_module = std::derived_from<T, Module> && requires { typename T::tracemod_reflected; } &&
                           std::same_as<typename T::tracemod_reflected, T>;

namespace detail {

template <class T>
inline constexpr bool is_tensor_member_v = std::derived_from<T, Parameter> || std::derived_from<T, Buffer>;

template <class T>
constexpr member_kind kind_of() {
  if constexpr (std::derived_from<T, Parameter>)
    return member_kind::parameter;
  else if constexpr (std::derived_from<T, Buffer>)
    return member_kind::buffer;
  else if constexpr (reflected_module<T>)
    return member_kind::module;
  else
    return member_kind::none;  // none_t, or a rejected member (already reported by a static_assert)
}

}  // namespace detail

/// The compile-time description of one reflected member: `name`, `pointer` (to the member, possibly
/// of a base class), `kind`, `value_type`; `get(obj)` / `descriptor(obj)` return the member.
template <class Class, detail::fixed_string Name, auto Pointer>
struct member_descriptor {
  using class_type = Class;
  using value_type = std::remove_cvref_t<decltype(std::declval<const Class&>().*Pointer)>;

  // Exactly one of these fires per mistake.
  static_assert(!std::derived_from<value_type, Module> || reflected_module<value_type>,
                "TM_MODULE: a listed member is a module class without its own TM_MODULE(Class, ...); add TM_MODULE "
                "to that class (a class derived from a reflected module must declare TM_MODULE again)");
  static_assert(!std::derived_from<value_type, Tensor> || detail::is_tensor_member_v<value_type>,
                "TM_MODULE: a listed member is a plain tmod::Tensor; declare it as tmod::Parameter (trainable) or "
                "tmod::Buffer (state such as running statistics)");
  static_assert(std::derived_from<value_type, Module> || std::derived_from<value_type, Tensor> ||
                    std::same_as<value_type, none_t>,
                "TM_MODULE: a listed member is neither a module, a tmod::Parameter, a tmod::Buffer nor tmod::none_t; "
                "leave other members (sizes, flags, options) out of TM_MODULE");

  static constexpr std::string_view name = Name.view();
  static constexpr auto hana_name = detail::to_hana_string<Name>(std::make_index_sequence<Name.size()>{});
  static constexpr auto pointer = Pointer;
  static constexpr member_kind kind = detail::kind_of<value_type>();

  template <class C>
    requires std::derived_from<std::remove_cvref_t<C>, Class>
  static constexpr decltype(auto) get(C&& object) {
    return (static_cast<C&&>(object).*Pointer);
  }
  /// hana::Struct accessor.
  template <class C>
  constexpr decltype(auto) operator()(C&& object) const {
    return get(static_cast<C&&>(object));
  }
};

/// The reflected members of T in declaration order: a boost::hana::tuple of member_descriptor.
template <class T>
constexpr auto members_of() {
  if constexpr (reflected_module<T>) {
    return T::tracemod_members();
  } else {
    static_assert(::tracemod::detail::always_false_v<T>,
                  "tmod::members_of<T>: T must be a module class that declares TM_MODULE(T, ...)");
    return boost::hana::tuple<>{};
  }
}

namespace nn {

/// A builtin module class: opaque to the tracer, with infer_shape. Exact type (a class derived from a
/// builtin with its own TM_MODULE is a user module, as in MegEngine).
template <class T>
concept builtin_module = reflected_module<T> && T::builtin;

template <class T>
inline constexpr bool is_builtin_module_v = builtin_module<T>;

}  // namespace nn

namespace detail {

template <class D, class Class>
void append_slot(const Class& self, std::vector<member_slot>& out) {
  const auto& value = D::get(self);
  member_slot s{std::string(D::name), D::kind, nullptr, nullptr, true};
  if constexpr (D::kind == member_kind::module)
    s.module = const_cast<Module*>(static_cast<const Module*>(&value));
  else if constexpr (D::kind == member_kind::parameter || D::kind == member_kind::buffer)
    s.tensor = const_cast<Tensor*>(static_cast<const Tensor*>(&value));
  out.push_back(std::move(s));
}

template <class Class, class... D>
void append_slots(const Class& self, std::vector<member_slot>& out, boost::hana::tuple<D...>) {
  (append_slot<D>(self, out), ...);
}

template <class Class>
void reflected_slots(const Class& self, std::vector<member_slot>& out) {
  append_slots(self, out, Class::tracemod_members());
}

template <class... D>
constexpr auto hana_accessors(boost::hana::tuple<D...>) {
  return boost::hana::make_tuple(boost::hana::make_pair(D::hana_name, D{})...);
}

template <class Class>
std::unique_ptr<Module> copy_module(const Class& self) {
  if constexpr (std::is_copy_constructible_v<Class>)
    return std::make_unique<Class>(self);
  else
    throw module_error(std::string(Class::tracemod_type_name) + " is not copy-constructible, so it cannot be copied");
}

template <class Class>
void assign_module(Class& self, Module&& source) {
  if constexpr (std::is_move_assignable_v<Class>)
    self = std::move(dynamic_cast<Class&>(source));
  else
    throw module_error(std::string(Class::tracemod_type_name) + " is not assignable, so setattr cannot replace it");
}

/// A user module class made builtin at run time by tmod::register_as_builtin<Class>() (graph layer,
/// which can infer shapes by recording): its erased call and shape inference. Null until then.
template <class Class>
struct registered_builtin {
  static inline Tensor (*call)(const Class&, std::span<const Tensor>) = nullptr;
  static inline Shape (*infer_shape)(const Class&, std::span<const Shape>) = nullptr;
};

/// A builtin module's forward on 1 or 2 tensors, chosen at run time from the input count.
template <class Class>
Tensor call_erased(const Class& self, std::span<const Tensor> in) {
  if constexpr (Class::builtin) {
    if (in.size() == 1) {
      if constexpr (requires { self.forward(in[0]); }) return self.forward(in[0]);
    } else if (in.size() == 2) {
      if constexpr (requires { self.forward(in[0], in[1]); }) return self.forward(in[0], in[1]);
    }
    throw module_error(std::string(Class::tracemod_type_name) + ": forward does not take " + std::to_string(in.size()) +
                       " tensor" + (in.size() == 1 ? "" : "s"));
  } else {
    if (const auto call = registered_builtin<Class>::call) return call(self, in);
    throw module_error(std::string(Class::tracemod_type_name) + " is not a builtin module: its forward is traced");
  }
}

template <class Class>
std::optional<functional::op_cost> cost_erased(const Class& self, std::span<const Shape> in) {
  if (in.size() == 1) {
    if constexpr (requires { self.cost(in[0]); }) return self.cost(in[0]);
  } else if (in.size() == 2) {
    if constexpr (requires { self.cost(in[0], in[1]); }) return self.cost(in[0], in[1]);
  }
  return std::nullopt;
}

template <class Class>
std::optional<Dims> infer_dims_erased(const Class& self, std::span<const ShapeDims> in) {
  if (in.size() == 1) {
    if constexpr (requires { self.infer_dims(in[0]); }) return self.infer_dims(in[0]);
  } else if (in.size() == 2) {
    if constexpr (requires { self.infer_dims(in[0], in[1]); }) return self.infer_dims(in[0], in[1]);
  }
  return std::nullopt;
}

template <class Class>
Shape infer_shape_erased(const Class& self, std::span<const Shape> in) {
  if constexpr (Class::builtin) {
    if (in.size() == 1) {
      if constexpr (requires { self.infer_shape(in[0]); }) return self.infer_shape(in[0]);
    } else if (in.size() == 2) {
      if constexpr (requires { self.infer_shape(in[0], in[1]); }) return self.infer_shape(in[0], in[1]);
    }
    throw module_error(std::string(Class::tracemod_type_name) + ": forward does not take " + std::to_string(in.size()) +
                       " tensor" + (in.size() == 1 ? "" : "s"));
  } else {
    if (const auto infer = registered_builtin<Class>::infer_shape) return infer(self, in);
    throw module_error(std::string(Class::tracemod_type_name) + " is not a builtin module: it has no shape inference");
  }
}

template <class Self, class Class>
Self clone_as(const Class& self) {
  static_assert(std::is_copy_constructible_v<Self>, "tmod::Module::clone: the module class must be copy-constructible");
  module_access::check_depth(self);  // the copy recurses once per level
  Self copy(self);
  module_access::detach_tensors(copy);
  return copy;
}

}  // namespace detail
}  // namespace tracemod

/// Everything but the member list: identity, call operator, typed clone, copy hooks.
#define TRACEMOD_DETAIL_MODULE_BASICS(Class, TypeName, Builtin)                                      \
 public:                                                                                             \
  using tracemod_reflected = Class;                                                                  \
  static constexpr ::std::string_view tracemod_type_name = TypeName;                                 \
  static constexpr bool builtin = Builtin;                                                           \
  [[nodiscard]] ::std::string_view type_name() const override { return tracemod_type_name; }        \
  [[nodiscard]] bool is_builtin() const noexcept override {                                          \
    return builtin || ::tracemod::detail::registered_builtin<Class>::call != nullptr;                \
  }                                                                                                  \
  template <class... TracemodArgs>                                                                   \
  decltype(auto) operator()(const TracemodArgs&... tracemod_args) const {                            \
    return ::tracemod::detail::call_module(*this, tracemod_args...);                                 \
  }                                                                                                  \
  template <class TracemodSelf = Class>                                                              \
  [[nodiscard]] TracemodSelf clone() const {                                                         \
    return ::tracemod::detail::clone_as<TracemodSelf>(*this);                                        \
  }                                                                                                  \
                                                                                                     \
 private:                                                                                            \
  [[nodiscard]] ::std::unique_ptr<::tracemod::Module> tracemod_copy_() const override {              \
    return ::tracemod::detail::copy_module<Class>(*this);                                            \
  }                                                                                                  \
  void tracemod_assign_(::tracemod::Module&& tracemod_source) override {                             \
    ::tracemod::detail::assign_module<Class>(*this, ::std::move(tracemod_source));                   \
  }                                                                                                  \
  [[nodiscard]] ::tracemod::Tensor tracemod_call_erased_(::std::span<const ::tracemod::Tensor> tracemod_in) \
      const override {                                                                               \
    return ::tracemod::detail::call_erased<Class>(*this, tracemod_in);                               \
  }                                                                                                  \
  [[nodiscard]] ::tracemod::Shape tracemod_infer_shape_erased_(                                      \
      ::std::span<const ::tracemod::Shape> tracemod_in) const override {                             \
    return ::tracemod::detail::infer_shape_erased<Class>(*this, tracemod_in);                        \
  }                                                                                                  \
  [[nodiscard]] ::std::optional<::tracemod::functional::op_cost> tracemod_cost_erased_(              \
      ::std::span<const ::tracemod::Shape> tracemod_in) const override {                             \
    return ::tracemod::detail::cost_erased<Class>(*this, tracemod_in);                               \
  }                                                                                                  \
  [[nodiscard]] ::std::optional<::tracemod::Dims> tracemod_infer_dims_erased_(                       \
      ::std::span<const ::tracemod::ShapeDims> tracemod_in) const override {                         \
    return ::tracemod::detail::infer_dims_erased<Class>(*this, tracemod_in);                         \
  }                                                                                                  \
                                                                                                     \
 public:

/// The run-time member list and the hana::Struct model, from Class::tracemod_members().
#define TRACEMOD_DETAIL_REFLECTED_MEMBERS(Class)                                                     \
 public:                                                                                             \
  struct hana_accessors_impl {                                                                       \
    static constexpr auto apply() { return ::tracemod::detail::hana_accessors(Class::tracemod_members()); } \
  };                                                                                                 \
                                                                                                     \
 private:                                                                                            \
  void tracemod_members_(::std::vector<::tracemod::detail::member_slot>& tracemod_out) const override { \
    static_assert(::std::is_same_v<Class, ::std::remove_cvref_t<decltype(*this)>>,                   \
                  "TM_MODULE: the first argument must name the class TM_MODULE is declared in");    \
    ::tracemod::detail::reflected_slots(*this, tracemod_out);                                        \
  }                                                                                                  \
                                                                                                     \
 public:

#define TRACEMOD_DETAIL_MEMBER(r, Class, i, member) \
  BOOST_PP_COMMA_IF(i)::tracemod::member_descriptor<Class, BOOST_PP_STRINGIZE(member), &Class::member> {}

#define TRACEMOD_DETAIL_MODULE(Class, Builtin, ...)                                                  \
 public:                                                                                             \
  static constexpr auto tracemod_members() {                                                         \
    return ::boost::hana::make_tuple(__VA_OPT__(                                                     \
        BOOST_PP_SEQ_FOR_EACH_I(TRACEMOD_DETAIL_MEMBER, Class, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)))); \
  }                                                                                                  \
  TRACEMOD_DETAIL_MODULE_BASICS(Class, #Class, Builtin)                                              \
  TRACEMOD_DETAIL_REFLECTED_MEMBERS(Class)

/// TM_MODULE(Class, members...): reflects a user module (traced through by the tracer).
#define TM_MODULE(Class, ...) TRACEMOD_DETAIL_MODULE(Class, false __VA_OPT__(, __VA_ARGS__))

/// The static member whose initialisation registers a builtin module class.
#define TRACEMOD_DETAIL_BUILTIN_REGISTRATION(Class)                                                  \
 private:                                                                                            \
  static inline const ::tracemod::nn::detail::builtin_registration<Class> tracemod_registration_{};  \
                                                                                                     \
 public:

/// TM_BUILTIN_MODULE(Class, members...): reflects a builtin module (opaque to the tracer) and
/// registers it in nn::builtin_registry.
#define TM_BUILTIN_MODULE(Class, ...)                                                                \
  TRACEMOD_DETAIL_MODULE(Class, true __VA_OPT__(, __VA_ARGS__))                                      \
  TRACEMOD_DETAIL_BUILTIN_REGISTRATION(Class)
