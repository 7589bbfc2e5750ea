// The program of elemwise.fused: a postfix expression over inputs x0, x1, ... and float constants
// whose functions are the registered elementwise ops' kernels. The table of those functions is
// generated from the op registry (an op whose kernel takes its operands' fbatch values joins it
// when it registers, under its kernel's name), so a new op, a user's included, can be fused without
// an edit here. Each call runs the eager kernel's functor, so a fused result has the unfused bits.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/repr.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/simd.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracemod::functional {

/// One function a fused program can call: the kernel functor of registered elementwise ops.
struct fused_function {
  std::string name;                    ///< what programs call it: relu, softsign (add/sub/mul/div print as + - * /)
  std::size_t arity = 1;               ///< operands it takes from the stack (1 or 2)
  arith_kind arith = arith_kind::none;  ///< add/sub/mul/div print infix, neg as a prefix minus
  /// out[j] = kernel(a[j]) (or kernel(a[j], b[j])) for j < count; out may be a.
  void (*run)(kernels::fbatch* out, const kernels::fbatch* a, const kernels::fbatch* b, std::size_t count) noexcept =
      nullptr;
};

namespace detail {

template <class Kernel>
inline constexpr char kernel_tag = 0;  // one address per kernel type: the table's key

template <class Kernel, std::size_t Arity>
void run_fused(kernels::fbatch* out, const kernels::fbatch* a, const kernels::fbatch* b, std::size_t count) noexcept {
  for (std::size_t j = 0; j < count; ++j) {
    if constexpr (Arity == 1)
      out[j] = Kernel{}(a[j]);
    else
      out[j] = Kernel{}(a[j], b[j]);
  }
}

}  // namespace detail

/// Whether an op's kernel can be a fused function: it maps its operands' vectors to one vector.
template <class Op>
concept fusable_op = requires { typename Op::kernel_op; } &&
                     ((Op::operands.size() == 1 && requires(const typename Op::kernel_op& k, const kernels::fbatch& v) {
                        { k(v) } -> std::same_as<kernels::fbatch>;
                      }) ||
                      (Op::operands.size() == 2 && requires(const typename Op::kernel_op& k, const kernels::fbatch& v) {
                        { k(v, v) } -> std::same_as<kernels::fbatch>;
                      }));

/// The functions of fused programs, one per kernel, in the order their first op registered.
/// Thread-safe; functions are never removed.
class fused_functions {
 public:
  static fused_functions& instance() {
    static fused_functions* t = new fused_functions;  // never destroyed: programs outlive static objects
    return *t;
  }

  /// The index of Op's kernel, added on first use under the kernel's name (the op's name if the
  /// kernel has none). Throws value_error if another kernel has that name.
  template <fusable_op Op>
  std::size_t add() {
    using K = typename Op::kernel_op;
    std::string name(Op::name);
    if constexpr (requires { K::name; }) name = std::string(K::name);
    constexpr std::size_t arity = Op::operands.size();
    arith_kind arith = arith_kind::none;
    if constexpr (requires { Op::arith; }) arith = Op::arith;
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < table_.size(); ++i) {
      if (keys_[i] == &detail::kernel_tag<K>) return i;
      if (table_[i].name == name)
        throw value_error(std::string(Op::target) + ": its kernel's fused name '" + name +
                          "' is taken by another op's kernel");
    }
    table_.push_back({std::move(name), arity, arith, &detail::run_fused<K, arity>});
    keys_.push_back(&detail::kernel_tag<K>);
    return table_.size() - 1;
  }

  [[nodiscard]] const fused_function& at(std::size_t i) const {
    const std::lock_guard lock(mutex_);
    if (i >= table_.size()) throw value_error("fused function " + std::to_string(i) + " does not exist");
    return table_[i];
  }
  /// The function written as a call `name(...)` (not the infix operators), or nullopt.
  [[nodiscard]] std::optional<std::size_t> find(std::string_view name) const {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < table_.size(); ++i)
      if (table_[i].name == name && !infix(table_[i])) return i;
    return std::nullopt;
  }
  /// The function an operator stands for (add for +, neg for a prefix -), or nullopt.
  [[nodiscard]] std::optional<std::size_t> find(arith_kind arith, std::size_t arity) const {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < table_.size(); ++i)
      if (table_[i].arith == arith && table_[i].arity == arity) return i;
    return std::nullopt;
  }
  [[nodiscard]] std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return table_.size();
  }

  /// + - * / are written between their operands, never as calls.
  static bool infix(const fused_function& f) noexcept {
    return f.arity == 2 && f.arith != arith_kind::none && f.arith != arith_kind::neg;
  }

 private:
  fused_functions() = default;
  mutable std::mutex mutex_;
  std::deque<fused_function> table_;  // a deque: references handed out stay valid as it grows
  std::vector<const void*> keys_;
};

/// A postfix program over inputs x0, x1, ... and float constants.
class fused_program {
 public:
  enum class opcode : std::uint8_t { input, constant, call };
  struct instruction {
    opcode op;
    std::int32_t input = 0;     ///< opcode::input: which input; opcode::call: the fused_functions index
    float value = 0.0f;         ///< for opcode::constant
    std::uint8_t arity = 0;     ///< operands the instruction pops
    decltype(fused_function::run) run = nullptr;  ///< opcode::call: the function's kernel
  };
  static constexpr std::size_t max_inputs = 8;
  static constexpr std::size_t max_depth = 16;
  /// Vectors each instruction runs on at a time: one dispatch per block, not per vector.
  static constexpr std::size_t block = 8;
  using block_values = std::array<kernels::fbatch, block>;

  /// Parses "relu(x0 * 0.5 + 1)": + - * / with the usual precedence, unary minus, parentheses,
  /// x<i> inputs, numbers (inf, nan) and calls of the fused functions by name (relu, minimum, ...).
  /// Throws value_error naming `op` and the position.
  static fused_program parse(std::string_view text, std::string_view op);

  void push_input(std::size_t i) {
    if (i >= max_inputs) fail("fused_program", "input x" + std::to_string(i) + " exceeds " + std::to_string(max_inputs));
    code_.push_back({opcode::input, static_cast<std::int32_t>(i), 0.0f});
  }
  void push_constant(float v) { code_.push_back({opcode::constant, 0, v}); }
  /// A call of fused function `function` (an index into fused_functions).
  void push_call(std::size_t function) {
    const fused_function& f = fused_functions::instance().at(function);
    code_.push_back({opcode::call, static_cast<std::int32_t>(function), 0.0f, static_cast<std::uint8_t>(f.arity), f.run});
  }

  [[nodiscard]] const std::vector<instruction>& code() const noexcept { return code_; }
  /// Number of inputs read: one past the largest index.
  [[nodiscard]] std::size_t inputs() const noexcept {
    std::size_t n = 0;
    for (const instruction& i : code_)
      if (i.op == opcode::input) n = std::max(n, static_cast<std::size_t>(i.input) + 1);
    return n;
  }

  /// The most values the program holds at once, or nullopt when it is malformed (an instruction
  /// lacks operands, or it does not leave exactly one value).
  [[nodiscard]] std::optional<std::size_t> stack_depth() const noexcept {
    std::size_t depth = 0, most = 0;
    for (const instruction& i : code_) {
      if (depth < i.arity) return std::nullopt;
      depth = depth - i.arity + 1;
      most = std::max(most, depth);
    }
    if (depth != 1) return std::nullopt;
    return most;
  }

  /// Throws value_error unless the program leaves exactly one value and stays within max_depth.
  void validate(std::string_view op) const {
    const std::optional<std::size_t> depth = stack_depth();
    if (!depth) fail(op, "the program must compute exactly one value, each instruction from its operands");
    if (*depth > max_depth) fail(op, "the program needs more than " + std::to_string(max_depth) + " stack slots");
  }

  /// Canonical text, which parse() reads back to the same program: minimal parentheses, constants
  /// as the shortest decimal that reads back as the same float.
  [[nodiscard]] std::string to_string() const {
    std::vector<std::pair<std::string, int>> stack;  // text, precedence
    for (const instruction& i : code_) {
      if (i.op == opcode::input) {
        stack.emplace_back("x" + std::to_string(i.input), 4);
        continue;
      }
      if (i.op == opcode::constant) {
        stack.emplace_back(repr_real(i.value), i.value < 0 ? 3 : 4);
        continue;
      }
      const fused_function& f = fused_functions::instance().at(static_cast<std::size_t>(i.input));
      if (f.arith == arith_kind::neg && f.arity == 1) {
        auto& a = stack.back();
        a = {"-" + wrap(a, 3), 3};
      } else if (fused_functions::infix(f)) {
        const int prec = f.arith == arith_kind::add || f.arith == arith_kind::sub ? 1 : 2;
        const auto b = stack.back();
        stack.pop_back();
        auto& a = stack.back();
        a = {wrap(a, prec) + " " + symbol(f.arith) + " " + wrap(b, prec + 1), prec};
      } else {
        std::string args;
        for (std::size_t k = stack.size() - f.arity; k < stack.size(); ++k)
          args += (args.empty() ? "" : ", ") + stack[k].first;
        stack.resize(stack.size() - f.arity + 1);
        stack.back() = {f.name + "(" + args + ")", 4};
      }
    }
    return stack.empty() ? std::string() : stack.back().first;
  }

  /// The program on `count` <= block vectors of each input (in[k][j]: input k's vector j), into
  /// out[0, count): each call runs the eager op's functor on the block.
  void evaluate(const std::array<block_values, max_inputs>& in, std::size_t count, kernels::fbatch* out) const noexcept {
    std::array<block_values, max_depth> slots;       // the values the program computes
    std::array<const kernels::fbatch*, max_depth> at;  // where each stack value is: an input or a slot
    std::size_t sp = 0;
    for (const instruction& i : code_) {
      if (i.op == opcode::input) {
        at[sp] = in[static_cast<std::size_t>(i.input)].data();
        ++sp;
      } else if (i.op == opcode::constant) {
        std::fill_n(slots[sp].begin(), count, kernels::fbatch(i.value));
        at[sp] = slots[sp].data();
        ++sp;
      } else {
        sp -= i.arity;
        i.run(slots[sp].data(), at[sp], i.arity == 2 ? at[sp + 1] : nullptr, count);
        at[sp] = slots[sp].data();
        ++sp;
      }
    }
    std::copy_n(at[0], count, out);
  }

 private:
  static const char* symbol(arith_kind a) noexcept {
    return a == arith_kind::add ? "+" : a == arith_kind::sub ? "-" : a == arith_kind::mul ? "*" : "/";
  }
  static std::string wrap(const std::pair<std::string, int>& e, int prec) {
    return e.second < prec ? "(" + e.first + ")" : e.first;
  }
  [[noreturn]] static void fail(std::string_view op, const std::string& why) {
    throw value_error(std::string(op) + ": " + why);
  }

  std::vector<instruction> code_;
};

/// Recursive descent over the grammar of fused_program::parse, emitting postfix code.
class fused_parser {
 public:
  fused_parser(std::string_view text, std::string_view op) : text_(text), op_(op) {}

  fused_program run() {
    expr();
    skip();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    p_.validate(op_);
    return std::move(p_);
  }

 private:
  void expr() {
    term();
    for (char c = peek(); c == '+' || c == '-'; c = peek()) {
      ++pos_;
      term();
      call(c == '+' ? arith_kind::add : arith_kind::sub, 2);
    }
  }
  void term() {
    unary();
    for (char c = peek(); c == '*' || c == '/'; c = peek()) {
      ++pos_;
      unary();
      call(c == '*' ? arith_kind::mul : arith_kind::div, 2);
    }
  }
  void unary() {
    if (peek() == '-') {
      ++pos_;
      unary();
      call(arith_kind::neg, 1);
      return;
    }
    primary();
  }
  void primary() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      expr();
      expect(')');
      return;
    }
    if ((c >= '0' && c <= '9') || c == '.') {
      const std::string rest(text_.substr(pos_));
      char* end = nullptr;
      const float v = std::strtof(rest.c_str(), &end);
      if (end == rest.c_str()) fail("a number");
      pos_ += static_cast<std::size_t>(end - rest.c_str());
      p_.push_constant(v);
      return;
    }
    const std::string name = identifier();
    if (name.size() > 1 && name[0] == 'x' && name.find_first_not_of("0123456789", 1) == std::string::npos) {
      const std::size_t i = std::stoul(name.substr(1));
      if (i >= fused_program::max_inputs) fail("at most " + std::to_string(fused_program::max_inputs) + " inputs");
      p_.push_input(i);
      return;
    }
    if (name == "inf" || name == "nan") {
      p_.push_constant(name == "inf" ? INFINITY : NAN);
      return;
    }
    if (const std::optional<std::size_t> f = name.empty() ? std::nullopt : fused_functions::instance().find(name)) {
      expect('(');
      const std::size_t arity = fused_functions::instance().at(*f).arity;
      for (std::size_t k = 0; k < arity; ++k) {
        if (k > 0) expect(',');
        expr();
      }
      expect(')');
      p_.push_call(*f);
      return;
    }
    fail(name.empty() ? "an operand" : "a known function, not '" + name + "'");
  }

  /// Emits the function an operator stands for.
  void call(arith_kind arith, std::size_t arity) {
    const std::optional<std::size_t> f = fused_functions::instance().find(arith, arity);
    if (!f) fail("an operator whose op is registered");
    p_.push_call(*f);
  }

  std::string identifier() {
    skip();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && ((text_[pos_] >= 'a' && text_[pos_] <= 'z') ||
                                   (text_[pos_] >= '0' && text_[pos_] <= '9') || text_[pos_] == '_'))
      ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  void skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  char peek() {
    skip();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail("'" + std::string(1, c) + "'");
    ++pos_;
  }
  [[noreturn]] void fail(const std::string& expected) const {
    throw value_error(std::string(op_) + ": cannot parse the program '" + std::string(text_) + "': expected " +
                      expected + " at position " + std::to_string(pos_));
  }

  std::string_view text_, op_;
  std::size_t pos_ = 0;
  fused_program p_;
};

inline fused_program fused_program::parse(std::string_view text, std::string_view op) {
  return fused_parser(text, op).run();
}

}  // namespace tracemod::functional
