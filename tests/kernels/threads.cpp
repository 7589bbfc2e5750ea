// Every kernel gives the same bits at 1, 2, 3 and 4 threads (docs/kernels.md, "Threads"), and
// parallel_for hands out each index exactly once.
#include <thread_counts.hpp>

#include <tracemod/core/parallel.hpp>
#include <tracemod/kernels/batch_norm.hpp>
#include <tracemod/kernels/conv2d.hpp>
#include <tracemod/kernels/elementwise.hpp>
#include <tracemod/kernels/gemm.hpp>
#include <tracemod/kernels/layout.hpp>
#include <tracemod/kernels/pooling.hpp>
#include <tracemod/kernels/reduce.hpp>
#include <tracemod/kernels/softmax.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tmod_test_kernels_threads {

namespace {

namespace k = tracemod::kernels;
namespace tmod = tracemod;
using thread_counts::check_bit_identical;

std::vector<float> random_floats(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> out_of(std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n)); }

}  // namespace

TEST_CASE("parallel_for: every index once, chunks of at least the grain, serial when nested") {
  const int before = tmod::get_num_threads();
  for (int threads = 1; threads <= 4; ++threads) {
    tmod::set_num_threads(threads);
    for (const std::int64_t grain : {1, 3, 50}) {
      std::vector<std::atomic<int>> hits(101);
      std::atomic<int> chunks{0}, short_chunks{0};
      tmod::parallel_for(0, 101, grain, [&](std::int64_t lo, std::int64_t hi) {
        ++chunks;
        if (hi - lo < grain) ++short_chunks;
        for (std::int64_t i = lo; i < hi; ++i) ++hits[static_cast<std::size_t>(i)];
      });
      for (const auto& h : hits) CHECK(h.load() == 1);
      CHECK(short_chunks.load() == 0);
      const int expected = tmod::parallel_backend_available() ? std::min<int>(threads, static_cast<int>(101 / grain)) : 1;
      CHECK(chunks.load() == expected);
      CHECK(tmod::parallel_chunk_count(0, 101, grain) == expected);
    }
    std::atomic<int> inner_chunks{0};
    tmod::parallel_for(0, 8, 1, [&](std::int64_t, std::int64_t) {
      tmod::parallel_for(0, 8, 1, [&](std::int64_t, std::int64_t) { ++inner_chunks; });
    });
    CHECK(inner_chunks.load() == tmod::parallel_chunk_count(0, 8, 1));  // one inner chunk per outer chunk
  }
  tmod::set_num_threads(before);
}

TEST_CASE("threads: gemm and matrix-vector products are bit-identical at 1-4 threads") {
  struct shape {
    bool ta, tb;
    std::int64_t m, n, k;
  };
  for (const shape s : {shape{false, false, 64, 200, 600}, shape{true, false, 37, 75, 1100}, shape{false, true, 70, 9, 40},
                        shape{true, true, 19, 301, 65}, shape{false, true, 1, 300, 100}, shape{false, false, 300, 1, 100},
                        shape{true, false, 1, 77, 33},
                        // Several column blocks, two k blocks and a dot-product column in the last
                        // block: each thread takes its own range of column panels (the column split),
                        // ranges starting inside a block.
                        shape{false, false, 20, 609, 600}, shape{false, true, 9, 1025, 70},
                        // op(A) packed once per k block, in parallel, and read by several column blocks.
                        shape{true, false, 45, 609, 1100},
                        // The tile split with every k block packed first: 7x7-plane-like columns (one
                        // panel, a narrow one and a dot-product column), 3 k blocks, 13 row panels,
                        // whose tiles 3 threads share unevenly; then a packed op(A).
                        shape{false, false, 100, 49, 1100}, shape{true, false, 75, 196, 1300},
                        // Operands too large to pack whole: the tile split packs per k block.
                        shape{true, false, 3, 2600, 2600}}) {
    const auto a = random_floats(s.m * s.k, 1), b = random_floats(s.k * s.n, 2), c0 = random_floats(s.m * s.n, 3);
    check_bit_identical("gemm " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k), [&] {
      std::vector<float> c = c0;
      k::gemm(s.ta, s.tb, s.m, s.n, s.k, 1.5f, a.data(), s.ta ? s.m : s.k, b.data(), s.tb ? s.k : s.n, 0.5f, c.data(), s.n);
      return c;
    });
  }
}

TEST_CASE("threads: conv2d is bit-identical at 1-4 threads (one image, a batch, groups)") {
  const auto conv = [](const k::conv2d_geometry& g, const std::string& what) {
    const auto x = random_floats(g.n * g.c * g.h * g.w, 4);
    const auto w = random_floats(g.k * g.c / g.groups * g.r * g.s, 5), bias = random_floats(g.k, 6);
    check_bit_identical("conv2d " + what, [&] {
      auto y = out_of(g.n * g.k * g.out_h() * g.out_w());
      k::conv2d(g, x.data(), w.data(), bias.data(), y.data());
      return y;
    });
  };
  conv({.n = 1, .c = 16, .h = 20, .w = 20, .k = 24, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1}, "3x3 pad 1");
  conv({.n = 1, .c = 40, .h = 15, .w = 13, .k = 33, .r = 3, .s = 3, .stride_h = 2, .stride_w = 2}, "3x3 stride 2");
  // A 14x14 plane: 196 columns, six panels and one 4 wide (dot-product columns), which two threads
  // split by columns (96 : 100); three or four get too few panels each and split the tiles.
  conv({.n = 1, .c = 64, .h = 14, .w = 14, .k = 64, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1}, "3x3 on 14x14");
  // A 7x7 plane with 520 filters: 65 row panels, at least 16 per thread, so 2-4 threads take the
  // row split (each packs all of op(B), two k blocks with a dot-product column, for its own rows).
  conv({.n = 1, .c = 120, .h = 7, .w = 7, .k = 520, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1}, "3x3 on 7x7, 520 filters");
  // Padded and strided, one image: each thread that packs columns pads its own copy of the input.
  conv({.n = 1, .c = 3, .h = 25, .w = 31, .k = 16, .r = 7, .s = 7, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 3},
       "7x7 stride 2 pad (1, 3) on 3 channels");
  // Few channels, the direct kernel: its bands of rows depend on the thread count, its bits must not.
  conv({.n = 1, .c = 3, .h = 61, .w = 83, .k = 10, .r = 3, .s = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
       "3 channels 3x3 stride 2");
  conv({.n = 2, .c = 1, .h = 30, .w = 45, .k = 6, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1}, "1 channel, batch 2");
  conv({.n = 5, .c = 8, .h = 9, .w = 11, .k = 12, .r = 1, .s = 1}, "1x1 batch 5");
  // Few input channels (gemm_small_k): threads split 7 whole column panels and a partial one.
  conv({.n = 1, .c = 32, .h = 15, .w = 16, .k = 20, .r = 1, .s = 1}, "1x1 on 32 channels");
  conv({.n = 3, .c = 12, .h = 10, .w = 10, .k = 18, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1, .groups = 3}, "groups 3");
  // Depthwise, channel-blocked, with the next block's outputs prefetched: chunks split the 74 planes
  // into blocks at different planes per thread count.
  conv({.n = 2, .c = 37, .h = 14, .w = 14, .k = 37, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1, .groups = 37},
       "depthwise 14x14");
  conv({.n = 1, .c = 40, .h = 28, .w = 29, .k = 40, .r = 3, .s = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1,
        .pad_w = 1, .groups = 40},
       "depthwise 28x29 stride 2");

  // One image on a large plane, forced direct: one GEMM with many column panels, split by columns,
  // with a residual and relu applied by whichever thread stores the last k block.
  const k::conv2d_geometry g{.n = 1, .c = 64, .h = 30, .w = 47, .k = 20, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1};
  const auto x = random_floats(g.n * g.c * g.h * g.w, 7), w = random_floats(g.k * g.c * g.r * g.s, 8);
  const auto bias = random_floats(g.k, 9), residual = random_floats(g.n * g.k * g.out_h() * g.out_w(), 10);
  check_bit_identical("conv2d direct 3x3 on 30x47 with residual and relu", [&] {
    auto y = out_of(g.n * g.k * g.out_h() * g.out_w());
    k::conv2d_bias_activation(g, x.data(), w.data(), {bias.data(), residual.data(), k::activation::relu}, y.data(),
                              k::conv2d_algorithm::direct);
    return y;
  });
  // The same with the epilogue on the small-k 1x1 path (16 input channels).
  const k::conv2d_geometry p{.n = 1, .c = 16, .h = 9, .w = 30, .k = 17, .r = 1, .s = 1};
  const auto px = random_floats(p.c * p.h * p.w, 11), pw = random_floats(p.k * p.c, 12);
  const auto pbias = random_floats(p.k, 13), pres = random_floats(p.k * p.h * p.w, 14);
  check_bit_identical("conv2d 1x1 on 16 channels with residual and relu6", [&] {
    auto y = out_of(p.k * p.h * p.w);
    k::conv2d_bias_activation(p, px.data(), pw.data(), {pbias.data(), pres.data(), k::activation::relu6}, y.data());
    return y;
  });
}

TEST_CASE("threads: pooling and batch norm are bit-identical at 1-4 threads") {
  const std::int64_t n = 2, c = 7, h = 17, w = 19;
  const auto x = random_floats(n * c * h * w, 7);
  k::pool2d_geometry g{.n = n, .c = c, .h = h, .w = w, .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                       .pad_h = 1, .pad_w = 1};
  check_bit_identical("max_pool2d", [&] {
    auto y = out_of(n * c * g.out_h() * g.out_w());
    k::max_pool2d(g, x.data(), y.data());
    return y;
  });
  g.count_include_pad = false;
  check_bit_identical("avg_pool2d", [&] {
    auto y = out_of(n * c * g.out_h() * g.out_w());
    k::avg_pool2d(g, x.data(), y.data());
    return y;
  });
  for (const std::array<std::int64_t, 2> out : {std::array<std::int64_t, 2>{1, 1}, {5, 3}})
    check_bit_identical("adaptive_avg_pool2d", [&] {
      auto y = out_of(n * c * out[0] * out[1]);
      k::adaptive_avg_pool2d(x.data(), y.data(), n, c, h, w, out[0], out[1]);
      return y;
    });

  const auto mean = random_floats(c, 8), weight = random_floats(c, 9), bias = random_floats(c, 10);
  std::vector<float> var = random_floats(c, 11);
  for (float& v : var) v = v * v + 0.5f;
  for (const std::size_t s : {std::size_t{1}, static_cast<std::size_t>(h * w)}) {
    const std::size_t batch = s == 1 ? static_cast<std::size_t>(n * h * w) : static_cast<std::size_t>(n);
    check_bit_identical("batch_norm_inference", [&] {
      auto y = out_of(static_cast<std::int64_t>(batch * static_cast<std::size_t>(c) * s));
      k::batch_norm_inference(x.data(), y.data(), batch, static_cast<std::size_t>(c), s, mean.data(), var.data(),
                              weight.data(), bias.data(), 1e-5f);
      return y;
    });
    check_bit_identical("batch_norm_training", [&] {
      auto y = out_of(static_cast<std::int64_t>(batch * static_cast<std::size_t>(c) * s));
      std::vector<float> running_mean = mean, running_var = var;
      k::batch_norm_training(x.data(), y.data(), batch, static_cast<std::size_t>(c), s, weight.data(), bias.data(),
                             running_mean.data(), running_var.data(), 0.1f, 1e-5f);
      y.insert(y.end(), running_mean.begin(), running_mean.end());
      y.insert(y.end(), running_var.begin(), running_var.end());
      return y;
    });
  }
}

TEST_CASE("threads: elementwise kernels, with and without broadcasting, are bit-identical at 1-4 threads") {
  const std::int64_t count = 1003;
  const auto a = random_floats(count, 12), b = random_floats(count, 13);
  check_bit_identical("unary", [&] {
    auto y = out_of(count);
    k::unary(k::sigmoid_op{}, a.data(), y.data(), count);
    return y;
  });
  check_bit_identical("binary", [&] {
    auto y = out_of(count);
    k::binary(k::div_op{}, a.data(), b.data(), y.data(), count);
    return y;
  });
  check_bit_identical("binary with a scalar", [&] {
    auto y = out_of(count);
    k::binary(k::sub_op{}, 0.5f, b.data(), y.data(), count);
    return y;
  });
  const tmod::Shape sx{3, 5, 7, 9}, sb{5, 1, 1}, sr{1, 9};
  const auto x = random_floats(sx.numel(), 14), bias = random_floats(5, 15), row = random_floats(9, 16);
  check_bit_identical("binary_broadcast [3,5,7,9] + [5,1,1]", [&] {
    auto y = out_of(sx.numel());
    k::binary_broadcast(k::add_op{}, x.data(), sx, bias.data(), sb, y.data(), sx);
    return y;
  });
  check_bit_identical("binary_broadcast [1,9] * [3,5,7,9]", [&] {
    auto y = out_of(sx.numel());
    k::binary_broadcast(k::mul_op{}, row.data(), sr, x.data(), sx, y.data(), sx);
    return y;
  });
}

TEST_CASE("threads: softmax and reductions are bit-identical at 1-4 threads") {
  for (const std::array<std::size_t, 3> v :
       {std::array<std::size_t, 3>{13, 70, 1}, {3, 40, 37}, {2, 3, 600}, {1, 5000, 1}}) {
    const std::size_t outer = v[0], len = v[1], inner = v[2];
    const auto n = static_cast<std::int64_t>(outer * len * inner), m = static_cast<std::int64_t>(outer * inner);
    const auto x = random_floats(n, 17);
    const std::string shape = std::to_string(outer) + "x" + std::to_string(len) + "x" + std::to_string(inner);
    check_bit_identical("softmax " + shape, [&] {
      auto y = out_of(n);
      k::softmax(x.data(), y.data(), outer, len, inner);
      return y;
    });
    using reduce_fn = void (*)(const float*, float*, std::size_t, std::size_t, std::size_t);
    for (const auto& reduction : {std::pair<const char*, reduce_fn>{"reduce_sum", k::reduce_sum},
                                  {"reduce_mean", k::reduce_mean}, {"reduce_max", k::reduce_max},
                                  {"reduce_min", k::reduce_min}})
      check_bit_identical(std::string(reduction.first) + " " + shape, [&] {
        auto y = out_of(m);
        reduction.second(x.data(), y.data(), outer, len, inner);
        return y;
      });
  }
}

TEST_CASE("threads: transpose and concat are bit-identical at 1-4 threads") {
  const tmod::Shape s{3, 17, 5, 33};
  const auto x = random_floats(s.numel(), 18);
  for (const std::array<std::size_t, 4> perm :
       {std::array<std::size_t, 4>{0, 2, 3, 1}, {1, 0, 2, 3}, {3, 2, 1, 0}, {0, 1, 3, 2}})
    check_bit_identical("transpose", [&] {
      auto y = out_of(s.numel());
      k::transpose(x.data(), s, perm, y.data());
      return y;
    });
  const std::array<tmod::Shape, 3> shapes{tmod::Shape{3, 4, 50}, tmod::Shape{3, 1, 50}, tmod::Shape{3, 7, 50}};
  const auto p0 = random_floats(600, 19), p1 = random_floats(150, 20), p2 = random_floats(1050, 21);
  const std::array<const float*, 3> parts{p0.data(), p1.data(), p2.data()};
  check_bit_identical("concat", [&] {
    auto y = out_of(3 * 12 * 50);
    k::concat(parts.data(), shapes.data(), 3, 1, y.data());
    return y;
  });
}

}  // namespace tmod_test_kernels_threads
