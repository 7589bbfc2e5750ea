// FuseConvBn, FuseAddMul and BackwardFoldScale on MegEngine's documented examples (exact structure),
// FuseConvEpilogue and FuseElemwise on hand-written graphs (exact structure and printed text), and
// all of them on nested modules and ResNet-18; every optimized module computes what the original
// computes.
#include "passes_test.hpp"
#include "thread_counts.hpp"

#include <models/mobilenet_v2.hpp>
#include <models/resnet.hpp>

#include <cstring>
#include <span>

namespace tmod_test_passes_fusions {

namespace {

using namespace passes_test;
namespace kern = tracemod::kernels;

void randomize(M::BatchNorm2d& bn, std::uint64_t seed) {
  const std::int64_t c = bn.num_features;
  bn.running_mean = tmod::randn({c}, seed);
  bn.running_var = tmod::uniform({c}, 0.5f, 2.f, seed + 1);
  bn.weight = tmod::uniform({c}, 0.5f, 1.5f, seed + 2);
  bn.bias = tmod::randn({c}, seed + 3);
}

/// relu(bn(conv(x))) with module conv and bn.
template <bool Bias, int Groups>
struct ConvBnNet : tmod::Module {
  M::Conv2d conv{4, 6, 3, {.padding = 1, .groups = Groups, .bias = Bias}};
  M::BatchNorm2d bn{6};
  TM_MODULE(ConvBnNet, conv, bn)
  auto forward(const auto& x) const {
    auto c = conv(x);
    auto n = bn(c);
    return F::relu(n);
  }
};

/// F::conv2d + F::batch_norm with constant statistics: grouped with bias and 5 statistics, then
/// 1x1 without bias and 2 statistics.
struct FunctionalConvBn : tmod::Module {
  tmod::Parameter w{tmod::randn({6, 2, 3, 3}, 11)};
  tmod::Parameter b{tmod::randn({6}, 12)};
  tmod::Parameter w2{tmod::randn({6, 6, 1, 1}, 13)};
  tmod::Buffer mean{tmod::randn({6}, 14)};
  tmod::Buffer var{tmod::uniform({6}, 0.5f, 2.f, 15)};
  tmod::Parameter gamma{tmod::uniform({6}, 0.5f, 1.5f, 16)};
  tmod::Parameter beta{tmod::randn({6}, 17)};
  TM_MODULE(FunctionalConvBn, w, b, w2, mean, var, gamma, beta)
  auto forward(const auto& x) const {
    auto c = F::conv2d(x, w, b, {.padding = 1, .groups = 2});
    auto n = F::batch_norm(c, mean, var, gamma, beta, {.eps = 1e-3});
    auto c2 = F::conv2d(n, w2, tmod::none);
    return F::batch_norm(c2, mean, var);
  }
};

/// MegEngine's doc: a conv used twice, followed by the same bn.
struct TwiceNet : tmod::Module {
  M::Conv2d conv_0{3, 4, 3, {.padding = 1}};
  M::BatchNorm2d bn_0{4};
  TM_MODULE(TwiceNet, conv_0, bn_0)
  auto forward(const auto& x1, const auto& x2) const {
    auto x = conv_0(x1);
    auto y1 = bn_0(x);
    auto x_ = conv_0(x2);
    auto y2 = bn_0(x_);
    return std::make_tuple(y1, y2);
  }
};

/// The conv's output is also returned: the bn must stay.
struct SharedConvOut : tmod::Module {
  M::Conv2d conv{3, 4, 3};
  M::BatchNorm2d bn{4};
  TM_MODULE(SharedConvOut, conv, bn)
  auto forward(const auto& x) const {
    auto c = conv(x);
    auto n = bn(c);
    return std::make_tuple(n, c);
  }
};

/// MegEngine's test block and two-block model: relu(bn(conv(x))) * scale in each branch.
struct Block : tmod::Module {
  M::Conv2d conv;
  M::BatchNorm2d bn;
  Block(std::int64_t in, std::int64_t out) : conv(in, out, 3, {.padding = 1, .bias = false}), bn(out) {}
  TM_MODULE(Block, conv, bn)
  auto forward(const auto& x) const {
    auto c = conv(x);
    auto n = bn(c);
    return F::relu(n);
  }
};
struct TwoBlocks : tmod::Module {
  Block block0{3, 4};
  Block block1{4, 4};
  tmod::Parameter scale0{tmod::tensor({0.5f})};
  tmod::Parameter scale1{tmod::tensor({3.f})};
  TM_MODULE(TwoBlocks, block0, block1, scale0, scale1)
  auto forward(const auto& x) const {
    auto a = block0(x);
    auto a1 = a * scale0;
    auto b = block1(a1);
    auto b1 = b * scale1;
    return F::max_pool2d(b1, 2) + 1.f;
  }
};

const tmod::Tensor image = tmod::randn({2, 4, 8, 8}, 5);

TEST_CASE("FuseConvBn: module conv and bn, with and without bias, grouped") {
  ConvBnNet<true, 1> a;
  ConvBnNet<false, 1> b;
  ConvBnNet<false, 2> c;
  std::uint64_t seed = 20;
  for (tmod::Module* net : std::initializer_list<tmod::Module*>{&a, &b, &c}) {
    CAPTURE(seed);
    auto& bn = dynamic_cast<M::BatchNorm2d&>(net->getattr("bn").module());
    randomize(bn, seed++);
    net->eval();
  }
  const auto check = [](auto& net) {
    tmod::TracedModule m = tmod::trace_module(net, image);
    CHECK(join(calls(m.graph())) == "call:Conv2d call:BatchNorm2d nn.relu");
    tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn"}, image);
    CHECK(join(calls(opt.graph())) == "call:Conv2d nn.relu");
    CHECK(opt.graph().get_node_by_name("conv_out").as_count() == 1);  // the conv keeps its output's name
  };
  check(a);
  check(b);
  check(c);
}

TEST_CASE("FuseConvBn: F::conv2d with constant weights and F::batch_norm with constant statistics") {
  FunctionalConvBn net;
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn"}, image);
  CHECK(join(calls(opt.graph())) == "nn.conv2d nn.conv2d");
  CHECK(opt.graph().get_node_by_name("conv2d_out").as_count() == 1);
}

TEST_CASE("FuseConvBn: a conv module called twice is copied as conv_0_1 for its first call") {
  TwiceNet net;
  randomize(net.bn_0, 30);
  net.eval();
  const tmod::Tensor x1 = tmod::randn({1, 3, 6, 6}, 1), x2 = tmod::randn({1, 3, 6, 6}, 2);
  tmod::TracedModule m = tmod::trace_module(net, x1, x2);
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn"}, x1, x2);
  CHECK(count(opt.graph(), "call:BatchNorm2d") == 0);
  CHECK(opt.has_attr("conv_0_1"));
  CHECK_FALSE(m.has_attr("conv_0_1"));
  std::vector<std::string> callees;
  for (const G::Expr* e : opt.graph().exprs(false))
    if (e->is_module_call()) callees.push_back(e->inputs().front()->name());
  CHECK(join(callees) == "conv_0_1 conv_0");
}

TEST_CASE("FuseConvBn refuses: a conv result used elsewhere, a bn in training mode") {
  SharedConvOut net;
  randomize(net.bn, 40);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 6, 6}, 3);
  tmod::TracedModule m = tmod::trace_module(net, x);
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn"}, x);
  CHECK(join(calls(opt.graph())) == "call:Conv2d call:BatchNorm2d");

  ConvBnNet<true, 1> train;
  train.train();
  tmod::TracedModule t = tmod::trace_module(train, image, tmod::TraceOptions{.check = false});
  CHECK(count(tmod::optimize(t, {"FuseConvBn"}).graph(), "call:BatchNorm2d") == 1);
}

struct DocAddMul : tmod::Module {
  tmod::Parameter scale0{tmod::tensor({1.f})};  // MegEngine's scale = [1, 2], indexed
  tmod::Parameter scale1{tmod::tensor({2.f})};
  TM_MODULE(DocAddMul, scale0, scale1)
  auto forward(const auto& x) const {
    auto a = x * scale0;
    auto b = 3.f * a;
    auto c = 3.f + b;
    return c - scale1;
  }
};
struct DocstringAddMul : tmod::Module {
  TM_MODULE(DocstringAddMul)
  auto forward(const auto& x) const {
    auto a = x + 1.f;
    auto b = 2.f + a;
    auto c = b * 4.f;
    return c * 0.25f;
  }
};
struct NegChain : tmod::Module {
  tmod::Parameter wide{tmod::tensor({1.f, 2.f, 3.f})};
  TM_MODULE(NegChain, wide)
  auto forward(const auto& x) const {
    auto n = -x;
    auto nn = -n;
    auto m = nn * 2.f;
    auto kept = m + 1.f;  // used twice: (kept + 2) cannot absorb it
    auto w = kept * wide;  // a (3,) constant: not a scalar
    auto w2 = w * 2.f;
    return std::make_tuple(kept + 2.f, kept, w2);
  }
};

/// The constant each op of `g` applies: its number, or its Constant input's first element.
std::vector<double> applied(const G::Graph& g) {
  std::vector<double> v;
  for (const G::Expr* e : g.exprs(false)) {
    if (e->op() == nullptr || e->inputs().empty()) continue;
    for (const auto& [pos, value] : e->const_val())
      if (pos == 1 && value.is_number()) v.push_back(value.number());
    if (e->inputs().size() == 2)
      if (const tmod::Tensor* t = tracemod::passes::constant_tensor(e->inputs()[1])) v.push_back(t->data<float>()[0]);
  }
  return v;
}

TEST_CASE("FuseAddMul: MegEngine's examples") {
  const tmod::Tensor x = tmod::randn({2, 3}, 4);
  DocAddMul doc;
  tmod::TracedModule m = tmod::trace_module(doc, x);
  tmod::TracedModule opt = optimized_matches(m, {"FuseAddMul"}, x);
  // x*scale[0]; 3*x; 3+x; x-scale[1]  ->  x * 3 + 1
  CHECK(join(calls(opt.graph())) == "__mul__ __add__");
  CHECK(applied(opt.graph()) == std::vector<double>{3.0, 1.0});

  DocstringAddMul docstring;
  tmod::TracedModule m2 = tmod::trace_module(docstring, x);
  tmod::TracedModule opt2 = optimized_matches(m2, {"FuseAddMul"}, x);
  // x+1; 2+x; x*4; x*0.25  ->  x + 3
  CHECK(join(calls(opt2.graph())) == "__add__");
  CHECK(applied(opt2.graph()) == std::vector<double>{3.0});
}

TEST_CASE("FuseAddMul: negations fold; shared intermediates and wide constants are refused") {
  const tmod::Tensor x = tmod::randn({2, 3}, 6);
  NegChain net;
  tmod::TracedModule m = tmod::trace_module(net, x);
  tmod::TracedModule opt = optimized_matches(m, {"FuseAddMul"}, x);
  // -(-x) * 2 -> x * 2; kept = x*2 + 1 is used twice; kept * wide * 2 keeps its (3,) constant.
  CHECK(join(calls(opt.graph())) == "__mul__ __add__ __mul__ __mul__ __add__");
}

struct DocFoldScale : tmod::Module {
  tmod::Parameter w{tmod::randn({4, 4, 3, 3}, 21)};
  tmod::Parameter b{tmod::randn({4}, 22)};
  TM_MODULE(DocFoldScale, w, b)
  auto forward(const auto& x) const {
    auto c = F::conv2d(x, w, b, {.padding = 1});
    auto r = F::relu(c);
    auto x1 = r + 3.f;
    auto x2 = r + 4.f;
    auto s = x1 + x2;
    return s * 3.f;
  }
};
struct DocFoldScaleReshape : tmod::Module {
  M::Conv2d conv{4, 4, 3};
  tmod::Parameter scale0{tmod::tensor({1.f})};
  tmod::Parameter scale1{tmod::tensor({2.f})};
  TM_MODULE(DocFoldScaleReshape, conv, scale0, scale1)
  auto forward(const auto& x) const {
    auto r = F::relu(conv(x));
    auto x1 = r * scale0;
    auto x2 = F::reshape(r, {-1}) * scale1;
    auto y = F::reshape(x1, {-1}) * 2.f;
    return y + x2;
  }
};
struct DisagreeingScales : tmod::Module {
  M::Conv2d conv{4, 4, 3};
  TM_MODULE(DisagreeingScales, conv)
  auto forward(const auto& x) const {
    auto r = F::relu(conv(x));
    auto a = r * 2.f;
    auto b = r * 3.f;
    auto n = -conv(x);  // a negative scale cannot cross relu
    auto rn = F::relu(n);
    return std::make_tuple(a + b, rn);
  }
};

TEST_CASE("BackwardFoldScale: MegEngine's docstring example") {
  DocFoldScale net;
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"BackwardFoldScale"}, image);
  // conv(x, w*3, b*3); relu; x1 = x + 9; x2 = x + 12; y = x1 + x2
  CHECK(join(calls(opt.graph())) == "nn.conv2d nn.relu __add__ __add__ __add__");
  std::vector<double> adds;
  for (const G::Expr* e : opt.graph().get_method_by_type("__add__", false))
    for (const auto& [pos, v] : e->const_val())
      if (v.is_number()) adds.push_back(v.number());
  CHECK(adds == std::vector<double>{9.0, 12.0});
  const G::Expr* conv = opt.graph().get_function_by_type(F::conv2d).as_unique();
  const tmod::Tensor& w = *tracemod::passes::constant_tensor(conv->inputs()[1]);
  for (std::int64_t i = 0; i < w.numel(); i += 7) CHECK(w.data<float>()[i] == 3.f * net.w.data<float>()[i]);
}

TEST_CASE("BackwardFoldScale: agreeing branches through reshape fold into a conv module") {
  DocFoldScaleReshape net;
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"BackwardFoldScale"}, image);
  CHECK(join(calls(opt.graph())) == "call:Conv2d nn.relu tensor.reshape tensor.reshape __add__");
}

TEST_CASE("BackwardFoldScale refuses disagreeing branches and negative scales through relu") {
  DisagreeingScales net;
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"BackwardFoldScale"}, image);
  CHECK(count(opt.graph(), "__mul__") == 2);
  CHECK(count(opt.graph(), "__neg__") == 0);  // NormElemWise: -c is elemwise.neg, kept
  CHECK(count(opt.graph(), "elemwise.neg") + count(opt.graph(), "__neg__") <= 1);
}

TEST_CASE("The two-block model: no batch norm after FuseConvBn, no __mul__ after BackwardFoldScale") {
  TwoBlocks net;
  randomize(net.block0.bn, 50);
  randomize(net.block1.bn, 60);
  net.eval();
  const tmod::Tensor x = tmod::randn({2, 3, 8, 8}, 7);
  tmod::TracedModule m = tmod::trace_module(net, x);
  // Nested: the bn of each block's own graph is fused.
  tmod::TracedModule nested = optimized_matches(m, {"FuseConvBn"}, x);
  CHECK(count(m.graph(), "call:BatchNorm2d") == 2);
  CHECK(count(nested.graph(), "call:BatchNorm2d") == 0);
  // Flattened (MegEngine's test): the scales cross the former block boundaries.
  tmod::TracedModule flat = m.flatten();
  tmod::TracedModule fused = optimized_matches(flat, {"FuseConvBn"}, x);
  CHECK(count(fused.graph(), "call:BatchNorm2d") == 0);
  tmod::TracedModule folded = optimized_matches(flat, {"BackwardFoldScale"}, x);
  CHECK(count(folded.graph(), "__mul__") == 0);
  CHECK(count(folded.graph(), "call:BatchNorm2d") == 0);
  tmod::TracedModule all = optimized_matches(flat, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale"}, x);
  CHECK(join(calls(all.graph())) == "call:Conv2d nn.relu call:Conv2d nn.relu nn.max_pool2d __add__");
}

/// The epilogues FuseConvEpilogue takes: module conv + bn + relu module; functional conv + relu6;
/// residual adds in both operand orders (one of them `+=`), with and without an activation.
struct EpilogueNet : tmod::Module {
  M::Conv2d conv{4, 4, 3, {.padding = 1, .bias = false}};
  M::BatchNorm2d bn{4};
  M::ReLU relu;
  tmod::Parameter w{tmod::randn({4, 4, 1, 1}, 31)};
  tmod::Parameter b{tmod::randn({4}, 32)};
  tmod::Parameter w2{tmod::randn({4, 2, 3, 3}, 33)};
  TM_MODULE(EpilogueNet, conv, bn, relu, w, b, w2)
  auto forward(const auto& x) const {
    auto c = conv(x);
    auto n = bn(c);
    auto r = relu(n);                                        // conv_bias_activation(relu)
    auto f = F::conv2d(r, w, b);
    auto r6 = F::relu6(f);                                   // conv_bias_activation(relu6)
    auto g = F::conv2d(r6, w2, tmod::none, {.padding = 1, .groups = 2});
    auto s = x + g;                                          // z + conv
    auto rs = F::relu(s);                                    // conv_bias_activation(z, relu)
    auto h = F::conv2d(rs, w, tmod::none);
    auto t = h + r6;                                         // conv + z, no activation: identity
    return t;
  }
};

/// What FuseConvEpilogue must leave: a conv result that is also returned, an add whose result is
/// used twice, an add that broadcasts.
struct RefusedEpilogues : tmod::Module {
  tmod::Parameter w{tmod::randn({4, 4, 1, 1}, 34)};
  tmod::Parameter row{tmod::randn({1, 4, 8, 8}, 35)};
  TM_MODULE(RefusedEpilogues, w, row)
  auto forward(const auto& x) const {
    auto c = F::conv2d(x, w, tmod::none);
    auto r = F::relu(c);                        // c is returned too
    auto d = F::conv2d(r, w, tmod::none);
    auto s = d + x;                             // s is used by the relu and returned
    auto rs = F::relu(s);
    auto e = F::conv2d(rs, w, tmod::none);
    auto bs = e + row;                          // row broadcasts over the batch: not an epilogue
    return std::make_tuple(F::relu(bs), c, s);
  }
};

TEST_CASE("FuseConvEpilogue: conv (module or function) + bias, residual in either order, relu / relu6") {
  EpilogueNet net;
  randomize(net.bn, 70);
  net.eval();
  tmod::TracedModule m = tmod::trace_module(net, image);
  CHECK(join(calls(m.graph())) ==
        "call:Conv2d call:BatchNorm2d call:ReLU nn.conv2d nn.relu6 nn.conv2d __add__ nn.relu nn.conv2d __add__");
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvEpilogue"}, image);
  CHECK(join(calls(opt.graph())) ==
        "nn.conv_bias_activation nn.conv_bias_activation nn.conv_bias_activation nn.conv_bias_activation");
  std::vector<std::string> modes, residuals;
  for (const G::Expr* e : opt.graph().exprs(false)) {
    if (e->target() != "nn.conv_bias_activation") continue;
    for (const auto& [name, arg] : e->named_args()) {
      if (name == "nonlinear_mode") modes.push_back(std::get<tmod::Value>(arg).string());
      if (name == "z")
        residuals.push_back(std::holds_alternative<G::Node*>(arg) ? std::get<G::Node*>(arg)->name() : "None");
    }
  }
  CHECK(join(modes) == "relu relu6 relu identity");
  CHECK(join(residuals) == "None None x relu6_out");
  // The conv module's folded weight is shared with the module, not copied.
  const G::Expr* first = nullptr;
  for (const G::Expr* e : opt.graph().exprs(false))
    if (first == nullptr && e->target() == "nn.conv_bias_activation") first = e;
  REQUIRE(first != nullptr);
  CHECK(first->inputs()[1]->name() == "conv_weight");
  const tmod::Tensor* weight = tracemod::passes::constant_tensor(first->inputs()[1]);
  REQUIRE(weight != nullptr);
  CHECK(weight->data<float>() == dynamic_cast<const M::Conv2d&>(opt.getattr("conv").module()).weight.data<float>());
  // Each fused call keeps the name of the value it replaces.
  CHECK(opt.graph().get_node_by_name("relu_out").as_count() == 1);
  CHECK(opt.graph().get_node_by_name("add_out_1").as_count() == 1);
}

TEST_CASE("FuseConvEpilogue refuses: a conv or add result used elsewhere, a broadcasting add") {
  RefusedEpilogues net;
  const tmod::Tensor x = tmod::randn({2, 4, 8, 8}, 36);
  tmod::TracedModule m = tmod::trace_module(net, x);
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvEpilogue"}, x);
  // relu(c): c is returned; relu(d + x): the sum is returned, but d + x alone still fuses (d has
  // one user) as an identity epilogue; relu(e + row): row broadcasts.
  CHECK(join(calls(opt.graph())) == "nn.conv2d nn.relu nn.conv_bias_activation nn.relu nn.conv2d __add__ nn.relu");
}

/// Two 3x3 convs on 16x16 (16 Winograd tiles: enough for filters transformed once), a module conv
/// with its batch norm and relu, then a functional conv with a residual add and relu. 20 input
/// channels each: with fewer than 17 (a reduction c * 9 <= 147) the few-channel direct kernel would
/// take them in builds whose vectors are 4 or 8 floats wide, whatever the filters.
struct WinogradNet : tmod::Module {
  M::Conv2d conv{20, 20, 3, {.padding = 1}};
  M::BatchNorm2d bn{20};
  tmod::Parameter w{tmod::randn({20, 20, 3, 3}, 37) * 0.15f};
  TM_MODULE(WinogradNet, conv, bn, w)
  auto forward(const auto& x) const {
    auto r = F::relu(bn(conv(x)));
    return F::relu(F::conv2d(r, w, tmod::none, {.padding = 1}) + r);
  }
};

TEST_CASE("FuseConvEpilogue: a conv that runs Winograd gets a read-only weight whose filters are transformed once") {
  WinogradNet net;
  randomize(net.bn, 80);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 20, 16, 16}, 38);
  REQUIRE(kern::conv2d_prefers_winograd_filters({1, 20, 16, 16, 20, 3, 3, 1, 1, 1, 1}));
  tmod::TracedModule m = tmod::trace_module(net, x);
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn", "FuseConvEpilogue"}, x);
  std::vector<const G::Expr*> fused;
  for (const G::Expr* e : opt.graph().exprs(false))
    if (e->target() == "nn.conv_bias_activation") fused.push_back(e);
  REQUIRE(fused.size() == 2);
  const tmod::Tensor* conv_weight = tracemod::passes::constant_tensor(fused[0]->inputs()[1]);
  const tmod::Tensor* w = tracemod::passes::constant_tensor(fused[1]->inputs()[1]);
  REQUIRE(conv_weight != nullptr);
  REQUIRE(w != nullptr);
  // Private read-only copies: the tensors the user can reach (the modules' weights) stay writable.
  const auto& conv = dynamic_cast<const M::Conv2d&>(opt.getattr("conv").module());
  for (const tmod::Tensor* t : {conv_weight, w}) {
    CHECK(t->read_only());
    tmod::Tensor handle = *t;
    CHECK_THROWS_AS((void)handle.data<float>(), tmod::value_error);
  }
  CHECK_FALSE(conv.weight.read_only());
  CHECK_FALSE(net.w.read_only());
  CHECK_FALSE(w->shares_storage_with(net.w));

  // The op with a read-only weight runs Winograd from filters kept with the weight, which 16 tiles
  // would not pick with filters transformed on each call: the bits of forced Winograd, not direct.
  const tmod::Tensor in = tmod::randn({1, 20, 16, 16}, 39);
  const auto run = [&](const tmod::Tensor& weight) {
    return F::conv_bias_activation(in, weight, tmod::none, in, 1, 1, 1, 1, "relu");
  };
  const tmod::Tensor kept = run(*w), kept_again = run(*w);
  const tmod::Tensor direct = run(w->clone());
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::winograd);
  const tmod::Tensor forced = run(w->clone());
  kern::set_conv2d_algorithm(kern::conv2d_algorithm::automatic);
  const auto same = [](const tmod::Tensor& a, const tmod::Tensor& b) {
    return std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
  };
  CHECK(same(kept, forced));
  CHECK(same(kept_again, forced));
  CHECK_FALSE(same(kept, direct));
  CHECK(rel_diff(kept, direct) <= 1e-5);

  // The optimized module: the same bits at 1 to 4 threads.
  const tmod::Tensor got = opt(x).tensor();
  thread_counts::check_bit_identical("optimized WinogradNet", [&] {
    const tmod::Tensor y = opt(x).tensor();
    return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
  });

  // Saved and loaded, the weights are plain tensors again: the same values, the kernel's usual choice.
  std::ostringstream os;
  tmod::save(opt, os);
  const std::string bytes = os.str();
  tmod::TracedModule back = tmod::load(std::as_bytes(std::span(bytes.data(), bytes.size())));
  CHECK(value_diff(back(x), tmod::Value(got)) <= 1e-4);
}

/// x * 0.5 + 1 -> relu, then a longer tree: a reflected op, a (4,1,1) parameter, x used twice; and
/// a single op alone, a chain whose middle is returned.
struct ElemwiseChains : tmod::Module {
  tmod::Parameter gain{tmod::randn({4, 1, 1}, 41)};
  tmod::Parameter one{tmod::tensor({0.25f})};
  TM_MODULE(ElemwiseChains, gain, one)
  auto forward(const auto& x) const {
    auto a = x * 0.5f;
    auto b = a + 1.f;
    auto r = F::relu(b);                 // the first fused expr ends here: r is returned
    auto d = 2.f - r;                    // __rsub__
    auto e = d * gain;                   // a (4,1,1) constant: an input
    auto f = F::exp(e * one);            // a one-element constant: a literal
    auto g = F::maximum(f, x);           // x again: the same input
    auto alone = F::tanh(x);             // a single op stays as it is
    return std::make_tuple(r, g, alone);
  }
};

TEST_CASE("FuseElemwise: maximal single-user chains become one elemwise.fused call, printed readably") {
  // Which ops take part is the ops' own fact: the fused function of their kernel.
  const auto fused_name = [](const F::op_entry& e) {
    REQUIRE(e.fused_function);
    return F::fused_functions::instance().at(*e.fused_function).name;
  };
  CHECK(fused_name(F::entry_of(F::method_rsub)) == "sub");
  CHECK(F::entry_of(F::method_rsub).fused_function == F::entry_of(F::sub).fused_function);
  CHECK(fused_name(F::entry_of(F::relu6)) == "relu6");
  CHECK_FALSE(F::entry_of(F::conv2d).fused_function);
  CHECK_FALSE(F::entry_of(F::fused_elementwise).fused_function);
  ElemwiseChains net;
  tmod::TracedModule m = tmod::trace_module(net, image);
  tmod::TracedModule opt = optimized_matches(m, {"FuseElemwise"}, image);
  CHECK(join(calls(opt.graph())) == "elemwise.fused elemwise.fused elemwise.tanh");
  std::ostringstream os;
  os << opt.graph();
  const std::string text = os.str();
  CAPTURE(text);
  // Hand-derived from the forward: x0 = x, x1 = gain (its first use), constants as literals.
  CHECK(text.find("relu_out = elemwise.fused[relu(x0 * 0.5 + 1.0)](x, )") != std::string::npos);
  CHECK(text.find("maximum_out = elemwise.fused[maximum(exp((2.0 - x0) * x1 * 0.25), x2)](relu_out, gain, x, )") !=
        std::string::npos);
}

TEST_CASE("ResNet-18 (narrow): every pass on the nested graphs, and all together") {
  models::ResNet net = models::resnet18(10, 8);
  std::uint64_t seed = 100;
  for (auto& [name, child] : net.named_modules())
    if (auto* bn = dynamic_cast<M::BatchNorm2d*>(&child)) randomize(*bn, seed += 4);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32}, 8);
  tmod::TracedModule m = tmod::trace_module(net, x);
  CHECK(count(m.graph(), "call:BatchNorm2d") == 20);
  for (const char* pass : {"AttrToConstant", "FoldConstant", "NormElemWise", "FuseConvBn", "FuseAddMul", "BackwardFoldScale"}) {
    CAPTURE(pass);
    static_cast<void>(optimized_matches(m, {pass}, x));
  }
  tmod::TracedModule opt = optimized_matches(m, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale"}, x);
  CHECK(count(opt.graph(), "call:BatchNorm2d") == 0);
  CHECK(count(opt.graph(), "call:Conv2d") == 20);
  // The fusions: every conv takes its bias, its residual add and its relu; no batch norm, relu or
  // add is left outside them, in the blocks' own graphs (not flattened).
  for (const char* pass : {"FuseConvEpilogue", "FuseElemwise"}) {
    CAPTURE(pass);
    static_cast<void>(optimized_matches(m, {pass}, x));
  }
  tmod::TracedModule all =
      optimized_matches(m, {"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue", "FuseElemwise"}, x);
  CHECK(count(all.graph(), "nn.conv_bias_activation") == 17);
  CHECK(count(all.graph(), "call:Conv2d") == 3);  // the downsample 1x1 convs: a bias, no epilogue
  for (const char* gone : {"call:BatchNorm2d", "call:ReLU", "nn.relu", "__add__", "elemwise.fused"}) {
    CAPTURE(gone);
    CHECK(count(all.graph(), gone) == 0);
  }
  std::size_t with_residual = 0;
  for (const G::Graph* g : all.graph().graphs(true))
    for (const G::Expr* e : g->exprs(false))
      if (e->target() == "nn.conv_bias_activation" && e->inputs().size() == 4) ++with_residual;
  CHECK(with_residual == 8);  // one per BasicBlock
}


TEST_CASE("MobileNetV2 (narrow): the shortcut add fuses into the projection conv once flattened") {
  models::MobileNetV2 net = models::mobilenet_v2(10, 0.25, 4);
  std::uint64_t seed = 300;
  for (auto& [name, child] : net.named_modules())
    if (auto* bn = dynamic_cast<M::BatchNorm2d*>(&child)) randomize(*bn, seed += 4);
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 32, 32}, 9);
  const std::vector<std::string> all{"FuseConvBn", "FuseAddMul", "BackwardFoldScale", "FuseConvEpilogue",
                                     "FuseElemwise"};
  const auto with_residual = [](const tmod::TracedModule& m) {
    std::size_t n = 0;
    for (const G::Graph* g : m.graph().graphs(true))
      for (const G::Expr* e : g->exprs(false))
        if (e->target() == "nn.conv_bias_activation" && e->inputs().size() == 4) ++n;
    return n;
  };
  tmod::TracedModule m = tmod::trace_module(net, x);
  CHECK(count(m.graph(), "call:Conv2d") == 52);  // stem, 1 x 2 + 16 x 3 in the blocks, head
  // Nested: each block's add is in the InvertedResidual's graph, its projection conv in the nested
  // Sequential's, so the conv takes its bias and relu6 but not the add.
  tmod::TracedModule nested = optimized_matches(m, all, x);
  CHECK(count(nested.graph(), "nn.conv_bias_activation") == 35);  // every conv-bn-relu6
  CHECK(count(nested.graph(), "__add__") == 10);
  CHECK(with_residual(nested) == 0);
  // Flattened: the 10 shortcut adds become identity epilogues; the 7 projections without a
  // shortcut keep a plain conv with the folded bias.
  tmod::TracedModule flat = m.flatten();
  tmod::TracedModule fused = optimized_matches(flat, all, x);
  CHECK(count(fused.graph(), "nn.conv_bias_activation") == 45);
  CHECK(count(fused.graph(), "call:Conv2d") == 7);
  CHECK(with_residual(fused) == 10);
  for (const char* gone : {"call:BatchNorm2d", "call:ReLU6", "nn.relu6", "__add__", "elemwise.fused"}) {
    CAPTURE(gone);
    CHECK(count(fused.graph(), gone) == 0);
  }
  CHECK(value_diff(fused(x), tmod::Value(net(x))) <= 1e-4);
}

}  // namespace

}  // namespace tmod_test_passes_fusions
