// A full-width ResNet-18 (random weights, eval mode) on one 3x224x224 image: prints the module tree
// summary, the output shape, the top-5 logits and the forward time.
#include <models/resnet.hpp>

#include <tracemod/core/factories.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace tmod = tracemod;

int main() {
  tmod::manual_seed(0);
  models::ResNet net = models::resnet18();
  net.eval();

  std::map<std::string, int> per_type;
  for (const auto& [name, m] : net.named_modules()) ++per_type[std::string(m.type_name())];
  std::int64_t weights = 0;
  for (const tmod::Parameter& p : net.parameters()) weights += p.numel();
  std::printf("ResNet-18: %zu modules, %zu parameter tensors (%lld values), %zu state_dict entries\n",
              net.named_modules().size(), net.parameters().size(), static_cast<long long>(weights),
              net.state_dict().size());
  for (const auto& [type, count] : per_type) std::printf("  %-18s x %d\n", type.c_str(), count);
  std::printf("top level:\n");
  for (const auto& [name, child] : net.named_children())
    std::printf("  %-8s %s\n", name.c_str(), std::string(child.type_name()).c_str());

  const tmod::Tensor x = tmod::randn({1, 3, 224, 224}, 42);
  (void)net(x);  // warm-up: first-touch allocations
  constexpr int runs = 5;
  std::vector<double> ms;
  tmod::Tensor y;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    y = net(x);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());

  std::printf("output shape %s\n", y.shape().to_string().c_str());
  std::vector<std::int64_t> order(static_cast<std::size_t>(y.numel()));
  std::iota(order.begin(), order.end(), 0);
  const float* logits = y.data<float>();
  std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                    [&](std::int64_t a, std::int64_t b) { return logits[a] > logits[b]; });
  std::printf("top-5 logits:");
  for (int i = 0; i < 5; ++i) std::printf(" [%lld] %.5f", static_cast<long long>(order[i]), logits[order[i]]);
  std::printf("\nforward: median %.1f ms over %d runs (single thread)\n", ms[runs / 2], runs);
}
