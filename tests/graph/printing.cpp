// The text format, names and ids of traced graphs (MegEngine's printing rules, DESIGN.md's example).
#include "graph_test.hpp"

#include <tracemod/graph/namespace.hpp>

#include <string>
#include <vector>

namespace tmod_test_graph_printing {

using namespace graph_test;

TEST_CASE("SimpleModule prints exactly as DESIGN.md shows") {
  SimpleModule m;
  tmod::TracedModule traced = tmod::trace_module(m, tmod::zeros({3, 4}));
  const std::string expected =
      "SimpleModule.Graph (self, x) {\n"
      "\t%2:\tconst_tensor = Constant(Tensor) -> (Tensor)\n"
      "\t%3:\tadd_out = x.__add__(const_tensor, )\n"
      "\t%4:\trelu_out = nn.relu(add_out, )\n"
      "\t%5:\tparam = getattr(self, \"param\") -> (Tensor)\n"
      "\t%6:\tadd_out_1 = relu_out.__add__(param, )\n"
      "\t%7:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
      "\t%8:\tlinear_out = linear(add_out_1, )\n"
      "\treturn linear_out\n"
      "}";
  CHECK(text(traced.graph()) == expected);
  std::ostringstream os;
  os << traced.graph();
  CHECK(os.str() == expected);
  const std::string with_ids = tmod::format_ids(traced.graph());
  CHECK(with_ids.rfind("SimpleModule.Graph (%0_self, %1_x) {\n", 0) == 0);
  CHECK(with_ids.find("\t%6:\t%6_add_out_1 = %4_relu_out.__add__(%5_param, )\n") != std::string::npos);
  CHECK(with_ids.find("\treturn %8_linear_out\n}") != std::string::npos);
  tmod::check(traced.graph());
}

TEST_CASE("names: identifiers, digit prefixes, keywords and _N suffixes (MegEngine's create_unique_name)") {
  tmod::graph::NameSpace ns;
  int a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
  CHECK(ns.create_unique_name("add_out", &a) == "add_out");
  CHECK(ns.create_unique_name("add_out", &b) == "add_out_1");
  CHECK(ns.create_unique_name("add_out", &c) == "add_out_2");
  CHECK(ns.create_unique_name("add_out", &a) == "add_out");  // the same owner keeps its name
  CHECK(ns.create_unique_name("layer1.0", &d) == "layer1_0");
  CHECK(ns.create_unique_name("0", &e) == "_0");
  CHECK(ns.create_unique_name("int", &f) == "int_1");
  ns.release("add_out_1");
  int g = 0;
  CHECK(ns.create_unique_name("add_out", &g) == "add_out_1");  // a released name is free again
}

namespace {

struct Scalars : tmod::Module {
  TM_MODULE(Scalars)
  auto forward(const auto& x) const {
    auto a = x * 2;
    auto b = a * 2.5;
    auto c = b * 0.1f;
    auto d = 2 - c;
    auto e = -d;
    return e / 4;
  }
};

struct Methods : tmod::Module {
  tmod::Buffer mean{tmod::zeros({2})};
  tmod::Buffer var{tmod::ones({2})};
  TM_MODULE(Methods, mean, var)
  auto forward(const auto& x, const auto& y) const {
    auto z = x * 1;  // a new value: eager mode then does not write into the caller's x
    z += y;
    auto n = F::batch_norm(z, mean, var);
    auto f = F::flatten(n, {.start_axis = 1});
    return F::concat(std::vector{f, f}, {.axis = 1});
  }
};

}  // namespace

TEST_CASE("scalars keep their C++ type; kwargs are sorted; defaults are filled in") {
  Scalars s;
  tmod::TracedModule t = tmod::trace_module(s, tmod::ones({2, 3}));
  const std::string g = text(t.graph());
  CHECK(g.find("mul_out = x.__mul__(2, )") != std::string::npos);
  CHECK(g.find("mul_out_1 = mul_out.__mul__(2.5, )") != std::string::npos);
  CHECK(g.find("mul_out_2 = mul_out_1.__mul__(0.1, )") != std::string::npos);  // a float: shortest digits
  CHECK(g.find("rsub_out = mul_out_2.__rsub__(2, )") != std::string::npos);
  CHECK(g.find("neg_out = rsub_out.__neg__(, )") != std::string::npos);
  CHECK(g.find("truediv_out = neg_out.__truediv__(4, )") != std::string::npos);

  Methods m;
  tmod::TracedModule tm = tmod::trace_module(m, tmod::ones({1, 2, 3}), tmod::ones({1, 2, 3}));
  const std::string h = text(tm.graph());
  CHECK(h.rfind("Methods.Graph (self, x, x_1) {\n", 0) == 0);
  CHECK(h.find("iadd_out = mul_out.__iadd__(x_1, )") != std::string::npos);
  CHECK(h.find("batch_norm_out = nn.batch_norm(iadd_out, mean, var, None, None, eps=1e-05, momentum=0.1, "
               "training=False)") != std::string::npos);
  CHECK(h.find("flatten_out = tensor.flatten(batch_norm_out, 1, -1, )") != std::string::npos);
  CHECK(h.find("concat_out = tensor.concat([flatten_out, flatten_out], 1, )") != std::string::npos);
  tmod::check(tm.graph());
}

TEST_CASE("named inputs, sub-graph names and ids in recursive execution order") {
  SimpleModule m;
  tmod::TracedModule t = tmod::trace_module(m, {{"image", tmod::zeros({3, 4})}});
  CHECK(text(t.graph()).rfind("SimpleModule.Graph (self, image) {\n", 0) == 0);

  Net net;
  net.eval();
  tmod::TracedModule tn = tmod::trace_module(net, tmod::randn({1, 3, 6, 6}));
  // Ids: self 0, x 1, then the top graph's exprs, each call followed by its callee's inputs and exprs.
  const std::string expected_top =
      "Net.Graph (self, x) {\n"
      "\t%2:\tblock0 = getattr(self, \"block0\") -> (Module)\n"
      "\t%3:\tblock0_out = block0(x, )\n"
      "\t%16:\tblock1 = getattr(self, \"block1\") -> (Module)\n"
      "\t%17:\tblock1_out = block1(block0_out, )\n"
      "\treturn block1_out\n"
      "}";
  CHECK(text(tn.graph()) == expected_top);
  const std::string expected_block =
      "Net_block0.Graph (self, x) {\n"
      "\t%6:\tconv = getattr(self, \"conv\") -> (Conv2d)\n"
      "\t%7:\tconv_out = conv(x, )\n"
      "\t%8:\tbn = getattr(self, \"bn\") -> (BatchNorm2d)\n"
      "\t%9:\tbn_out = bn(conv_out, )\n"
      "\t%10:\trelu_out = nn.relu(bn_out, )\n"
      "\t%11:\tadd_out = relu_out.__add__(1, )\n"
      "\t%12:\tid = getattr(self, \"id\") -> (Module)\n"
      "\t%13:\tid_out = id(add_out, )\n"
      "\treturn id_out\n"
      "}";
  CHECK(text(sub(tn, "block0").graph()) == expected_block);
  CHECK(sub(tn, "block0").graph().qualname() == "Net.block0");
  CHECK(sub(tn, "block1").graph().name() == "Net_block1");
  CHECK(sub(tn, "block0.id").graph().name() == "Net_block0_id");
  const auto exprs = tn.graph().exprs().as_list();
  for (std::size_t i = 0; i < exprs.size(); ++i) CHECK(exprs[i]->id() == static_cast<std::int64_t>(i));
  CHECK(tn.total_ids() == std::pair<std::int64_t, std::int64_t>{30, 30});
  tmod::check(tn.graph());
}

TEST_CASE("an empty graph prints an empty line; outputs print flattened") {
  TwoOutputs m;
  tmod::TracedModule t = tmod::trace_module(m, tmod::ones({1, 4}));
  CHECK(text(t.graph()).find("\treturn mul_out, x\n}") != std::string::npos);
  IdentityMod id;
  tmod::TracedModule ti = tmod::trace_module(id, tmod::ones({2}));
  CHECK(text(ti.graph()) == "IdentityMod.Graph (self, x) {\n\t\n\treturn x\n}");
}

}  // namespace tmod_test_graph_printing
