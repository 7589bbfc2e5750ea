// ChannelShuffle, Embedding, MultiheadAttention, TransformerEncoderLayer and TransformerEncoder
// against PyTorch (tests/data/zoo_modules/, written by tests/reference/gen_goldens.py): each case
// loads PyTorch's state_dict strictly and runs eagerly, traced (the interpreter) and traced -> saved
// -> loaded; bad input names the module and the shapes.
#include <golden.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/functional.hpp>
#include <tracemod/io/serialize.hpp>
#include <tracemod/nn.hpp>
#include <tracemod/traced_module.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <filesystem>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tmod_test_zoo_modules {

namespace {

namespace tmod = tracemod;
namespace M = tracemod::nn;
using tmod::Tensor;

constexpr double rtol = 2e-5, atol = 2e-6;

std::string case_path(const std::string& name) { return "zoo_modules/" + name; }

/// PyTorch's state_dict of a case: every <case>.<key>.npy that is not an input or the output.
tmod::StateDict state(const std::string& name) {
  std::vector<std::pair<std::string, std::filesystem::path>> found;
  const std::string prefix = name + ".";
  for (const auto& entry : std::filesystem::directory_iterator(golden::data_dir() / "zoo_modules")) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(prefix)) continue;
    const std::string key = file.substr(prefix.size(), file.size() - prefix.size() - 4);
    const bool io = key == "out" || (key.size() == 3 && key.starts_with("in"));
    if (!io) found.emplace_back(key, entry.path());
  }
  std::sort(found.begin(), found.end());
  tmod::StateDict d;
  for (const auto& [key, path] : found) d.insert(key, tmod::io::load_npy(path));
  return d;
}

/// f(inputs[0], ..., inputs[N - 1]).
template <std::size_t N, class F>
decltype(auto) spread(F&& f, const std::vector<Tensor>& in) {
  REQUIRE(in.size() == N);
  return [&]<std::size_t... I>(std::index_sequence<I...>) { return f(in[I]...); }(std::make_index_sequence<N>{});
}

/// An int32 tensor of `values`, shaped (n,).
Tensor int32s(std::initializer_list<std::int32_t> values) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, tmod::DType::int32);
  std::copy(values.begin(), values.end(), t.data<std::int32_t>());
  return t;
}

/// A user module around a builtin one: trace_module traces user modules, which call builtins.
template <class B>
struct Around : tmod::Module {
  B inner;
  explicit Around(B b) : inner(std::move(b)) {}
  TM_MODULE(Around, inner)
  auto forward(const auto& x) const { return inner(x); }
};

/// trace_module(m, x...), through Around when m is builtin.
template <class Module, class... X>
tmod::TracedModule trace(const Module& m, const X&... x) {
  if constexpr (M::is_builtin_module_v<Module>)
    return tmod::trace_module(Around<Module>(m), x...);
  else
    return tmod::trace_module(m, x...);
}

tmod::TracedModule round_trip(const tmod::TracedModule& m) {
  std::ostringstream os;
  tmod::save(m, os);
  const std::string bytes = os.str();
  return tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

/// Loads the case's state into `m` (strictly: the keys are PyTorch's), then checks the eager, traced
/// and loaded outputs against PyTorch's.
template <std::size_t N, class Module>
void check_case(Module& m, const std::string& name) {
  CAPTURE(name);
  m.eval();
  const tmod::StateDict expected_state = state(name);
  std::vector<std::string> keys = m.state_dict().keys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == expected_state.keys());  // sorted: the files do not keep PyTorch's order
  m.load_state_dict(expected_state);
  const std::vector<Tensor> in = golden::inputs(case_path(name));
  const Tensor expected = golden::load(case_path(name), "out");
  const Tensor eager = spread<N>([&](const auto&... x) { return Tensor(m(x...)); }, in);
  golden::check_close(eager, expected, rtol, atol, name + " eager");
  const tmod::TracedModule traced = spread<N>([&](const auto&... x) { return trace(m, x...); }, in);
  golden::check_close(spread<N>([&](const auto&... x) { return traced(x...).tensor(); }, in), expected, rtol, atol,
                      name + " traced");
  const tmod::TracedModule loaded = round_trip(traced);
  golden::check_close(spread<N>([&](const auto&... x) { return loaded(x...).tensor(); }, in), expected, rtol, atol,
                      name + " loaded");
}

std::string graph_text(const tmod::TracedModule& m) {
  std::ostringstream os;
  os << m.graph();
  return os.str();
}

}  // namespace

TEST_CASE("zoo modules: ChannelShuffle matches PyTorch, and traces with dynamic N, H and W") {
  M::ChannelShuffle shuffle(3);
  check_case<1>(shuffle, "channel_shuffle_g3");
  CHECK(shuffle.repr() == "ChannelShuffle(groups=3)");  // PyTorch's repr
  const tmod::TracedModule t = tmod::trace_module(
      Around<M::ChannelShuffle>(shuffle), tmod::randn({2, 6, 3, 4}), tmod::TraceOptions{.dynamic_dims = {{0, "N"}, {2, "H"}, {3, "W"}}});
  const Tensor other = tmod::randn({3, 6, 2, 5}, 7);
  golden::check_close(t(other).tensor(), shuffle(other), 0, 0, "dynamic shuffle");
  // Channel 1 of the output is input channel C / groups = 2 (a hand-derived permutation).
  const Tensor y = shuffle(other);
  CHECK(y.data<float>()[10] == other.data<float>()[2 * 10]);
  CHECK_THROWS_WITH_AS((void)M::ChannelShuffle(4)(other), doctest::Contains("(3, 6, 2, 5)"), tmod::shape_error);
  CHECK_THROWS_AS(M::ChannelShuffle(0), tmod::value_error);
}

TEST_CASE("zoo modules: Embedding matches PyTorch; out-of-range indices name the op, index and bound") {
  M::Embedding emb(10, 4, 0);
  check_case<1>(emb, "embedding_padding");
  CHECK(emb.repr() == "Embedding(10, 4, padding_idx=0)");
  M::Embedding fresh(5, 3, -1);
  CHECK(fresh.padding_idx == 4);
  for (int j = 0; j < 3; ++j) CHECK(fresh.weight.data<float>()[4 * 3 + j] == 0.f);
  const Tensor bad = int32s({1, 10, 2});
  CHECK_THROWS_WITH_AS((void)emb(bad), doctest::Contains("nn.embedding: index 10 at position 1"), tmod::value_error);
  CHECK_THROWS_WITH_AS((void)emb(bad), doctest::Contains("[0, 10)"), tmod::value_error);
  CHECK_THROWS_AS((void)emb(int32s({-1})), tmod::value_error);
  CHECK_THROWS_AS((void)emb(tmod::tensor({1.f})), tmod::dtype_error);
  CHECK_THROWS_AS(M::Embedding(3, 2, 3), tmod::value_error);
  // F::embedding on a 0-d index gives one row; on an empty index, no rows.
  Tensor scalar = Tensor::empty({}, tmod::DType::int32);
  scalar.data<std::int32_t>()[0] = 7;
  const Tensor row = tmod::functional::embedding(scalar, emb.weight);
  REQUIRE(row.shape() == tmod::Shape{4});
  for (int j = 0; j < 4; ++j) CHECK(row.data<float>()[j] == emb.weight.data<float>()[7 * 4 + j]);
  CHECK(tmod::functional::embedding(Tensor::empty({0, 2}, tmod::DType::int32), emb.weight).shape() == tmod::Shape{0, 2, 4});
  const tmod::TracedModule t = tmod::trace_module(Around<M::Embedding>(emb), int32s({1, 2}),
                                                  tmod::TraceOptions{.dynamic_dims = {{0, "L"}}});
  const Tensor idx = int32s({9, 0, 3, 3, 1});
  golden::check_close(t(idx).tensor(), emb(idx), 0, 0, "dynamic embedding");
  CHECK_THROWS_WITH_AS((void)t(bad), doctest::Contains("index 10"), tmod::value_error);
}

TEST_CASE("zoo modules: MultiheadAttention matches PyTorch (cross attention, padding mask, no bias)") {
  M::MultiheadAttention cross(8, 2);
  check_case<3>(cross, "mha_cross");
  M::MultiheadAttention masked(8, 4, {.batch_first = true});
  check_case<4>(masked, "mha_batch_first_mask");
  M::MultiheadAttention plain(6, 3, {.bias = false});
  check_case<3>(plain, "mha_no_bias");
  CHECK(plain.state_dict().keys() == std::vector<std::string>{"in_proj_weight", "out_proj.weight"});
}

TEST_CASE("zoo modules: MultiheadAttention refuses bad configurations and inputs, naming the shapes") {
  CHECK_THROWS_WITH_AS(M::MultiheadAttention(8, 3), doctest::Contains("divisible by num_heads 3"), tmod::value_error);
  M::MultiheadAttention mha(8, 2, {.batch_first = true});
  const Tensor x = tmod::randn({2, 5, 8}), narrow = tmod::randn({2, 5, 6});
  CHECK_THROWS_WITH_AS((void)mha(narrow, x, x), doctest::Contains("query (2, 5, 6)"), tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)mha(x, x, tmod::randn({2, 4, 8})), doctest::Contains("one sequence length"), tmod::shape_error);
  const Tensor wrong_mask = tmod::functional::astype(tmod::zeros({2, 4}), tmod::DType::boolean);
  CHECK_THROWS_WITH_AS((void)mha(x, x, x, wrong_mask), doctest::Contains("key_padding_mask (bool, shape (2, 4))"),
                       tmod::shape_error);
  CHECK_THROWS_WITH_AS((void)mha(x, x, x, tmod::zeros({2, 5})), doctest::Contains("must be bool (N, S) = (2, 5)"),
                       tmod::shape_error);
  CHECK_THROWS_AS((void)tmod::trace_module(mha, x, x, narrow), tmod::shape_error);
}

TEST_CASE("zoo modules: TransformerEncoderLayer and TransformerEncoder match PyTorch") {
  M::TransformerEncoderLayer relu(8, 2, {.dim_feedforward = 16});
  check_case<1>(relu, "encoder_layer_relu");
  CHECK(relu.state_dict().keys() ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                 "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                                 "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"});
  M::TransformerEncoderLayer gelu(8, 2, {.dim_feedforward = 12, .activation = "gelu", .batch_first = true, .norm_first = true});
  check_case<2>(gelu, "encoder_layer_gelu_norm_first_mask");
  M::TransformerEncoder encoder(M::TransformerEncoderLayer(8, 2, {.dim_feedforward = 16, .batch_first = true}), 2);
  check_case<2>(encoder, "encoder_2_layers_mask");
  CHECK(encoder.layers[0].linear1.weight.data<float>() != encoder.layers[1].linear1.weight.data<float>());
  CHECK_THROWS_WITH_AS(M::TransformerEncoderLayer(8, 2, {.activation = "tanh"}), doctest::Contains("'tanh'"),
                       tmod::value_error);
  CHECK_THROWS_AS(M::MultiheadAttention(8, 2, {.dropout = 1.5}), tmod::value_error);
  // Attention dropout has no kernel: a layer in training mode with dropout > 0 refuses to run.
  M::TransformerEncoderLayer training(8, 2, {.dim_feedforward = 16});
  CHECK_THROWS_WITH_AS((void)training(tmod::randn({5, 2, 8})), doctest::Contains("attention dropout"), tmod::module_error);
  training.eval();
  CHECK_NOTHROW((void)training(tmod::randn({5, 2, 8})));
}

TEST_CASE("zoo modules: a traced encoder layer is a graph of ops and runs at another sequence length") {
  M::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16});
  layer.eval();
  const tmod::TracedModule t =
      tmod::trace_module(layer, tmod::randn({5, 2, 8}), tmod::TraceOptions{.dynamic_dims = {{0, "L"}}});
  const std::string text = graph_text(t);
  CHECK(text.find("self_attn(") != std::string::npos);
  CHECK(text.find("norm1(") != std::string::npos);
  const Tensor longer = tmod::randn({9, 2, 8}, 3);
  golden::check_close(t(longer).tensor(), layer(longer), 1e-5, 1e-6, "dynamic sequence length");
  const Tensor mask = tmod::functional::greater(tmod::randn({2, 5}, 4), tmod::full({1}, 1.0));
  const tmod::TracedModule tm = tmod::trace_module(layer, tmod::randn({5, 2, 8}), mask,
                                                   tmod::TraceOptions{.dynamic_dims = {{0, "L", 0}, {1, "L", 1}}});
  const Tensor longer_mask = tmod::functional::greater(tmod::randn({2, 9}, 5), tmod::full({1}, 1.0));
  golden::check_close(tm(longer, longer_mask).tensor(), layer(longer, longer_mask), 1e-5, 1e-6, "dynamic, masked");
  const tmod::TracedModule flat = t.flatten();
  CHECK(graph_text(flat).find("nn.scaled_dot_product_attention") != std::string::npos);
  golden::check_close(flat(longer).tensor(), layer(longer), 1e-5, 1e-6, "flattened");
}

TEST_CASE("zoo modules: traced self-attention projects once, as eager self-attention does") {
  M::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16});
  layer.eval();
  const Tensor x = tmod::randn({5, 2, 8}, 6);
  const tmod::TracedModule t = tmod::trace_module(layer, x, tmod::TraceOptions{.dynamic_dims = {{0, "L"}}});
  const std::string attn = graph_text(t.getattr("self_attn").as<tmod::TracedModule>());
  std::size_t linears = 0;
  for (std::size_t at = attn.find("nn.linear("); at != std::string::npos; at = attn.find("nn.linear(", at + 1)) ++linears;
  CHECK(linears == 1);  // in_proj; out_proj is a Linear module call
  golden::check_close(t(x).tensor(), layer(x), 1e-6, 1e-6, "self-attention traced");
  const Tensor longer = tmod::randn({7, 2, 8}, 7);
  golden::check_close(t(longer).tensor(), layer(longer), 1e-5, 1e-6, "self-attention traced, longer");
  // distinct query, key and value nodes keep three projections
  M::MultiheadAttention mha(8, 2);
  const tmod::TracedModule cross = tmod::trace_module(mha, x, tmod::randn({4, 2, 8}), tmod::randn({4, 2, 8}));
  const std::string cross_text = graph_text(cross);
  std::size_t cross_linears = 0;
  for (std::size_t at = cross_text.find("nn.linear("); at != std::string::npos; at = cross_text.find("nn.linear(", at + 1))
    ++cross_linears;
  CHECK(cross_linears == 3);
}

}  // namespace tmod_test_zoo_modules
