// Traces a full-width ResNet-18 (random weights: no torchvision state_dict offline) with
// tmod::trace_module, prints the top graph and layer1's graph, checks the traced module against eager
// mode, flattens it, and writes the whole hierarchy as Graphviz DOT (render with `dot -Tsvg resnet18.dot -o
// resnet18.svg`).
//
//   trace_resnet [out.dot]        (default: resnet18.dot)
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>
#include <tracemod/traced_module.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace tmod = tracemod;

int main(int argc, char** argv) {
  const std::string dot_path = argc > 1 ? argv[1] : "resnet18.dot";
  tmod::manual_seed(0);
  models::ResNet net = models::resnet18();
  net.eval();
  const tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 1);

  tmod::TracedModule traced = tmod::trace_module(net, x);
  std::cout << traced.graph() << "\n\n";
  std::cout << traced.getattr("layer1").as<tmod::TracedModule>().graph() << "\n\n";

  const tmod::Tensor eager = net(x);
  const tmod::Tensor replay = traced(x);
  float max_diff = 0.0f;
  const auto a = eager.values<float>();
  const auto b = replay.values<float>();
  for (std::size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
  std::printf("%lld exprs in %zu graphs; traced vs eager: max |difference| %g\n",
              static_cast<long long>(traced.total_ids().second), traced.graph().graphs(true).size(),
              static_cast<double>(max_diff));

  tmod::TracedModule flat = traced.flatten();
  const tmod::Tensor flat_out = flat(x);
  const bool flat_equal = std::equal(a.begin(), a.end(), flat_out.values<float>().begin());
  std::printf("flattened: %zu exprs in one graph; equal to eager: %s\n", flat.graph().expr_list_().size(),
              flat_equal ? "yes" : "no");

  std::ofstream(dot_path) << traced.graph().to_dot();
  std::printf("wrote %s\n", dot_path.c_str());
  return max_diff == 0.0f && flat_equal ? 0 : 1;
}
