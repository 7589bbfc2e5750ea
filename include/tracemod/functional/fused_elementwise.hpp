// elemwise.fused: a chain of elementwise ops as one op whose param is a small expression program over
// its inputs and constants, e.g. "relu(x0 * 0.5 + 1)", run as ONE SIMD pass: every output vector goes
// through the whole program in registers, through the shared elementwise loop
// (kernels::detail::transform) and the N-ary broadcast planner. The run-time twin of the
// compile-time fusion of typed graphs (trace/evaluate.hpp). Each instruction is the functor of the
// eager op it stands for, so a fused result has the bits of the unfused ops.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/repr.hpp>
#include <tracemod/functional/onnx_rule.hpp>
#include <tracemod/functional/op.hpp>
#include <tracemod/kernels/detail/elementwise_broadcast.hpp>
#include <tracemod/kernels/detail/elementwise_loop.hpp>
#include <tracemod/kernels/elementwise.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracemod::functional {

/// A postfix program over inputs x0, x1, ... and float constants.
class fused_program {
 public:
  enum class opcode : std::uint8_t {
    input, constant,                                // leaves
    neg, relu, relu6, exp, sigmoid, tanh,           // unary
    add, sub, mul, div, minimum, maximum,           // binary
  };
  struct instruction {
    opcode op;
    std::int32_t input = 0;  ///< for opcode::input
    float value = 0.0f;      ///< for opcode::constant
  };
  static constexpr std::size_t max_inputs = 8;
  static constexpr std::size_t max_depth = 16;

  /// Parses "relu(x0 * 0.5 + 1)": + - * / with the usual precedence, unary minus, parentheses,
  /// x<i> inputs, numbers (inf, nan), relu relu6 neg exp sigmoid tanh minimum maximum. Throws
  /// value_error naming `op` and the position.
  static fused_program parse(std::string_view text, std::string_view op);

  void push_input(std::size_t i) {
    if (i >= max_inputs) fail("fused_program", "input x" + std::to_string(i) + " exceeds " + std::to_string(max_inputs));
    code_.push_back({opcode::input, static_cast<std::int32_t>(i), 0.0f});
  }
  void push_constant(float v) { code_.push_back({opcode::constant, 0, v}); }
  void push(opcode op) { code_.push_back({op, 0, 0.0f}); }

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
      const std::size_t pops = arity(i.op);
      if (depth < pops) return std::nullopt;
      depth = depth - pops + 1;
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
      switch (i.op) {
        case opcode::input: stack.emplace_back("x" + std::to_string(i.input), 4); break;
        case opcode::constant: stack.emplace_back(repr_real(i.value), i.value < 0 ? 3 : 4); break;
        case opcode::neg: {
          auto& a = stack.back();
          a = {"-" + wrap(a, 3), 3};
          break;
        }
        case opcode::add:
        case opcode::sub:
        case opcode::mul:
        case opcode::div: {
          const int prec = i.op == opcode::add || i.op == opcode::sub ? 1 : 2;
          const auto b = stack.back();
          stack.pop_back();
          auto& a = stack.back();
          a = {wrap(a, prec) + " " + symbol(i.op) + " " + wrap(b, prec + 1), prec};
          break;
        }
        case opcode::minimum:
        case opcode::maximum: {
          const auto b = stack.back();
          stack.pop_back();
          auto& a = stack.back();
          a = {std::string(function_name(i.op)) + "(" + a.first + ", " + b.first + ")", 4};
          break;
        }
        default: {
          auto& a = stack.back();
          a = {std::string(function_name(i.op)) + "(" + a.first + ")", 4};
        }
      }
    }
    return stack.empty() ? std::string() : stack.back().first;
  }

  /// The program on one vector of each input: each instruction runs the eager op's functor.
  [[nodiscard]] kernels::fbatch evaluate(const std::array<kernels::fbatch, max_inputs>& in) const noexcept;

  static constexpr std::size_t arity(opcode op) noexcept {
    return op <= opcode::constant ? 0 : op <= opcode::tanh ? 1 : 2;
  }

 private:
  /// The ops written as function calls, and their names.
  static constexpr std::array<std::pair<opcode, std::string_view>, 8> functions{
      {{opcode::neg, "neg"},
       {opcode::relu, "relu"},
       {opcode::relu6, "relu6"},
       {opcode::exp, "exp"},
       {opcode::sigmoid, "sigmoid"},
       {opcode::tanh, "tanh"},
       {opcode::minimum, "minimum"},
       {opcode::maximum, "maximum"}}};
  static std::string_view function_name(opcode op) noexcept {
    for (const auto& [code, name] : functions)
      if (code == op) return name;
    return {};
  }
  static const char* symbol(opcode op) noexcept {
    return op == opcode::add ? "+" : op == opcode::sub ? "-" : op == opcode::mul ? "*" : "/";
  }
  static std::string wrap(const std::pair<std::string, int>& e, int prec) {
    return e.second < prec ? "(" + e.first + ")" : e.first;
  }
  [[noreturn]] static void fail(std::string_view op, const std::string& why) {
    throw value_error(std::string(op) + ": " + why);
  }

  friend class fused_parser;
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
  using opcode = fused_program::opcode;

  void expr() {
    term();
    for (char c = peek(); c == '+' || c == '-'; c = peek()) {
      ++pos_;
      term();
      p_.push(c == '+' ? opcode::add : opcode::sub);
    }
  }
  void term() {
    unary();
    for (char c = peek(); c == '*' || c == '/'; c = peek()) {
      ++pos_;
      unary();
      p_.push(c == '*' ? opcode::mul : opcode::div);
    }
  }
  void unary() {
    if (peek() == '-') {
      ++pos_;
      unary();
      p_.push(opcode::neg);
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
    for (const auto& [op, function] : fused_program::functions) {
      if (name != function) continue;
      expect('(');
      expr();
      if (fused_program::arity(op) == 2) {
        expect(',');
        expr();
      }
      expect(')');
      p_.push(op);
      return;
    }
    fail(name.empty() ? "an operand" : "a known function, not '" + name + "'");
  }

  std::string identifier() {
    skip();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && ((text_[pos_] >= 'a' && text_[pos_] <= 'z') || (text_[pos_] >= '0' && text_[pos_] <= '9')))
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

namespace detail {

template <class... K>
struct kernel_list {};
/// The kernel functor each instruction runs, indexed by opcode; the leaves run none. evaluate()'s
/// dispatch and opcode_of_kernel are both generated from this one list.
using instruction_kernels =
    kernel_list<void, void, kernels::neg_op, kernels::relu_op, kernels::relu6_op, kernels::exp_op, kernels::sigmoid_op,
                kernels::tanh_op, kernels::add_op, kernels::sub_op, kernels::mul_op, kernels::div_op,
                kernels::minimum_op, kernels::maximum_op>;

/// Runs instruction I's kernel on the top of the stack (one operand for unary ops, two for binary).
template <std::size_t I, class Kernel>
inline void run_kernel(kernels::fbatch* st, std::size_t& sp) noexcept {
  if constexpr (std::is_void_v<Kernel>) {
    static_assert(fused_program::arity(static_cast<fused_program::opcode>(I)) == 0);
  } else if constexpr (fused_program::arity(static_cast<fused_program::opcode>(I)) == 1) {
    st[sp - 1] = Kernel{}(st[sp - 1]);
  } else {
    --sp;
    st[sp - 1] = Kernel{}(st[sp - 1], st[sp]);
  }
}

template <class... K, std::size_t... I>
inline void run_instruction(fused_program::opcode op, kernels::fbatch* st, std::size_t& sp, kernel_list<K...>,
                            std::index_sequence<I...>) noexcept {
  static_assert(sizeof...(K) == static_cast<std::size_t>(fused_program::opcode::maximum) + 1,
                "instruction_kernels lists one kernel per opcode");
  (void)((static_cast<std::size_t>(op) == I && (run_kernel<I, K>(st, sp), true)) || ...);
}

template <class KernelOp, class... K>
consteval std::optional<fused_program::opcode> find_opcode(kernel_list<K...>) {
  std::optional<fused_program::opcode> found;
  std::size_t i = 0;
  ((std::is_same_v<K, KernelOp> ? void(found = static_cast<fused_program::opcode>(i++)) : void(i++)), ...);
  return found;
}

}  // namespace detail

/// The instruction that runs an elementwise kernel functor, if any: an op whose kernel has one can
/// become part of a fused program (FuseElemwise).
template <class KernelOp>
inline constexpr std::optional<fused_program::opcode> opcode_of_kernel =
    detail::find_opcode<KernelOp>(detail::instruction_kernels{});

inline kernels::fbatch fused_program::evaluate(const std::array<kernels::fbatch, max_inputs>& in) const noexcept {
  std::array<kernels::fbatch, max_depth> st;
  st[0] = kernels::fbatch(0.0f);  // a validated program writes it; this tells the compiler so
  std::size_t sp = 0;
  for (const instruction& i : code_) {
    if (i.op == opcode::input) {
      st[sp++] = in[static_cast<std::size_t>(i.input)];
    } else if (i.op == opcode::constant) {
      st[sp++] = kernels::fbatch(i.value);
    } else {
      detail::run_instruction(i.op, st.data(), sp, detail::instruction_kernels{},
                              std::make_index_sequence<static_cast<std::size_t>(opcode::maximum) + 1>{});
    }
  }
  return st[0];
}

namespace detail {

/// The inputs of a fused pass at one output row: each a contiguous run or one repeated value.
struct fused_operands {
  std::array<const float*, fused_program::max_inputs> ptr{};
  std::array<bool, fused_program::max_inputs> repeated{};
  std::size_t count = 0;

  [[nodiscard]] std::array<kernels::fbatch, fused_program::max_inputs> load(std::int64_t i) const noexcept {
    std::array<kernels::fbatch, fused_program::max_inputs> v{};
    for (std::size_t k = 0; k < count; ++k)
      v[k] = repeated[k] ? kernels::fbatch(*ptr[k]) : kernels::fbatch::load_unaligned(ptr[k] + i);
    return v;
  }
  [[nodiscard]] fused_operands from(std::int64_t i) const noexcept {
    fused_operands o = *this;
    for (std::size_t k = 0; k < count; ++k)
      if (!repeated[k]) o.ptr[k] += i;
    return o;
  }
  [[nodiscard]] std::array<kernels::fbatch, fused_program::max_inputs> load_partial(std::int64_t i,
                                                                                    std::int64_t n) const noexcept {
    std::array<kernels::fbatch, fused_program::max_inputs> v{};
    for (std::size_t k = 0; k < count; ++k)
      v[k] = repeated[k] ? kernels::fbatch(*ptr[k]) : kernels::detail::array_operand{ptr[k]}.load_partial(i, n);
    return v;
  }
};

}  // namespace detail

struct fused_elementwise_params {
  std::string expr = "x0";
};

/// elemwise.fused[expr](inputs): expr over x0 = inputs[0], x1 = inputs[1], ... with numpy
/// broadcasting of the inputs against each other.
struct fused_elementwise_fn : op_base<fused_elementwise_fn> {
  static constexpr std::string_view name = "fused";
  static constexpr std::string_view target = "elemwise.fused";
  static constexpr call_kind kind = call_kind::function;
  static constexpr bool elementwise = true;
  static constexpr std::array operands{operand{"inputs", operand_kind::tensor_list}};
  using params = fused_elementwise_params;
  static constexpr std::tuple fields{required("expr", &params::expr)};

  /// What a graph prints as the callee: elemwise.fused[relu(x0 * 0.5 + 1)].
  static std::string callee(const params& p) {
    return std::string(target) + "[" + fused_program::parse(p.expr, target).to_string() + "]";
  }

  static Shape infer_shape(const params& p, std::span<const Shape> inputs) {
    const fused_program program = fused_program::parse(p.expr, target);
    if (program.inputs() != inputs.size())
      throw value_error(std::string(target) + ": the program '" + p.expr + "' reads " +
                        std::to_string(program.inputs()) + " inputs, got " + std::to_string(inputs.size()));
    Shape out{};
    for (const Shape& s : inputs) out = broadcast_shapes(out, s, target);
    return out;
  }

  template <class List>
  static Tensor eager(const params& p, const List& list) {
    const std::vector<Tensor> inputs = as_vector(list);
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      require_float32(target, "inputs[" + std::to_string(i) + "]", inputs[i]);
      shapes.push_back(inputs[i].shape());
    }
    const Shape out = infer_shape(p, shapes);
    const fused_program program = fused_program::parse(p.expr, target);
    Tensor y = Tensor::empty(out, DType::float32, target);
    if (out.numel() == 0) return y;
    const auto f = [&program](const std::array<kernels::fbatch, fused_program::max_inputs>& in) {
      return program.evaluate(in);
    };
    const kernels::detail::broadcast_rows rows = kernels::detail::plan_broadcast_rows(shapes, out);
    float* const dst = y.data<float>();
    const std::int64_t n = rows.row_length;
    if (rows.rows == 1) {
      detail::fused_operands o;
      o.count = inputs.size();
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        o.ptr[k] = inputs[k].data<float>();
        o.repeated[k] = rows.row_stride(k) == 0;
      }
      kernels::detail::transform(f, dst, n, o);
      return y;
    }
    kernels::detail::parallel_rows(rows.rows, n, [&](std::int64_t first, std::int64_t last) {
      kernels::detail::for_each_broadcast_row(rows, first, last, [&](const std::int64_t* offsets, std::int64_t iy) {
        detail::fused_operands o;
        o.count = inputs.size();
        for (std::size_t k = 0; k < inputs.size(); ++k) {
          o.ptr[k] = inputs[k].data<float>() + offsets[k];
          o.repeated[k] = rows.row_stride(k) == 0;
        }
        kernels::detail::transform(f, dst + iy, n, o);
      });
    });
    return y;
  }

  static void onnx_export(onnx_export_context& cx, const params& p);

 private:
  static std::vector<Tensor> as_vector(const std::vector<Tensor>& v) { return v; }
  static std::vector<Tensor> as_vector(std::span<const Tensor> v) { return {v.begin(), v.end()}; }
  template <class... T>
  static std::vector<Tensor> as_vector(const std::tuple<T...>& t) {
    return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
  }
};
inline constexpr fused_elementwise_fn fused_elementwise{};

/// The program unfused again: each instruction exported as the op that runs it.
inline void fused_elementwise_fn::onnx_export(onnx_export_context& cx, const params& p) {
  using opcode = fused_program::opcode;
  const fused_program program = fused_program::parse(p.expr, target);
  const std::vector<fused_program::instruction>& code = program.code();
  std::vector<onnx_operand> stack;
  for (std::size_t k = 0; k < code.size(); ++k) {
    const fused_program::instruction& i = code[k];
    const bool last = k + 1 == code.size();
    const std::string out = last ? cx.output() : cx.fresh(cx.output() + "_f");
    if (i.op == opcode::input || i.op == opcode::constant) {
      onnx_operand leaf = i.op == opcode::input ? cx.input(0).list.at(static_cast<std::size_t>(i.input))
                                                : onnx_operand::tensor(cx.graph().scalar(i.value), Shape{});
      if (last) leaf.name = cx.node1("Identity", {leaf.name}, out);
      stack.push_back(std::move(leaf));
      continue;
    }
    const std::size_t arity = fused_program::arity(i.op);
    std::vector<onnx_operand> operands(stack.end() - static_cast<std::ptrdiff_t>(arity), stack.end());
    stack.resize(stack.size() - arity);
    onnx_export_context step = cx.with(cx.sub_call(std::move(operands), out));
    cx.graph().export_instruction(static_cast<std::size_t>(i.op), step);
    stack.push_back(onnx_operand::tensor(out, cx.output_shape()));
  }
}

}  // namespace tracemod::functional
