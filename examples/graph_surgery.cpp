// Graph surgery on a traced ResNet-18 (docs/graph-surgery.md quotes this program's output):
// every ReLU module call replaced by a wrapped `my_relu6`, F::neg inserted after a relu, and the
// outputs reset to a dict of intermediate values.
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/traced_module/surgery.hpp>
#include <tracemod/graph/wrap.hpp>
#include <tracemod/traced_module/trace_module.hpp>
#include <tracemod/traced_module/traced_module.hpp>

#include <iostream>
#include <vector>

namespace tmod = tracemod;
namespace F = tracemod::functional;
namespace G = tracemod::graph;

// A user function made one builtin op: recorded as a single call, not as minimum(relu(x), 6).
const auto my_relu6 = tmod::wrap("my_relu6", [](const auto& x) { return F::minimum(F::relu(x), 6.f); });

int main() {
  models::ResNet net = models::resnet18();
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 224, 224});
  tmod::TracedModule traced = tmod::trace_module(net, x);
  G::Graph& block = traced.getattr("layer1.0").as<tmod::TracedModule>().graph();
  std::cout << "== layer1.0 as traced\n" << block << "\n\n";

  // 1. Every ReLU module call (17, in every graph) becomes my_relu6 of the same input.
  std::vector<G::Expr*> relus;
  for (G::Expr* e : traced.graph().get_method_by_type("__call__"))
    if (static_cast<const G::ModuleNode*>(e->inputs().front())->module_type() == "ReLU") relus.push_back(e);
  for (G::Expr* e : relus) {
    G::Graph& g = *e->top_graph();
    G::Node* r6 = nullptr;
    {
      auto scope = G::insert_exprs(g, e);  // new exprs go right after the ReLU call
      r6 = my_relu6(tmod::Sym(e->inputs()[1])).node();
    }
    G::replace_node(g, {{e->output(), r6}});  // later users read my_relu6_out
  }
  std::cout << "== layer1.0 with my_relu6 (" << relus.size() << " ReLU calls replaced in all)\n" << block << "\n\n";

  // 2. F::neg after the first my_relu6 of the block, then a tensor attribute read with attr().
  G::Node* r6 = block.get_function_by_type("my_relu6", false).as_list().front()->output();
  G::Node* neg = nullptr;
  {
    auto scope = G::insert_exprs(block, r6->expr());
    const tmod::Sym self(block.inputs().front());
    auto w = G::attr(self, "bn1.weight");
    neg = (F::neg(tmod::Sym(r6)) * F::reshape(w, {1, -1, 1, 1})).node();
  }
  G::replace_node(block, {{r6, neg}});
  std::cout << "== layer1.0 with -my_relu6(x) * bn1.weight\n" << block << "\n\n";

  // 3. The top graph returns a dict of fc's input and output and the avgpool input.
  G::Graph& top = traced.graph();
  G::Expr* fc = nullptr;
  G::Expr* pool = nullptr;
  for (G::Expr* e : top.get_method_by_type("__call__", false)) {
    const auto& type = static_cast<const G::ModuleNode*>(e->inputs().front())->module_type();
    if (type == "Linear") fc = e;
    if (type == "AdaptiveAvgPool2d") pool = e;
  }
  G::reset_outputs(top, G::NodeTree::dict({{"fc_in", G::NodeTree::leaf(fc->inputs()[1])},
                                           {"fc_out", G::NodeTree::leaf(fc->output())},
                                           {"pool_in", G::NodeTree::leaf(pool->inputs()[1])}}));
  std::cout << "== top graph with a dict of outputs\n" << top << "\n\n";
  const tmod::Value out = traced(x);
  for (const auto& [key, v] : out.dict_items()) std::cout << key << ": " << v.tensor().shape().to_string() << "\n";
  tmod::check(top);
}
