// A training step's dense-layer products through the engine's CPU GEMM (cpu_gemm), next to the
// 2048³ SGEMM timed in the same run (before and after): for each layer's product (qkv, attention
// output, feed-forward up and down) on M rows, the forward X·Wᵀ, the backward dX = dY·W and
// dW += dYᵀ·X, each timed two ways in alternation: one layer's operands L times ("hot": they
// stay in cache) and L layers' own operands in turn ("cold": as a step meets them; L = 24 weight
// sets are larger than the caches). It answers whether a step's products run slower than the
// SGEMM because of their shapes or because their operands come from memory. A benchmark: prints
// GFLOP/s and the share of the SGEMM, asserts nothing.
//   bench_dense_shapes [--model base|large] [--rows M] [--threads T] [--layers L] [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "bench_gemm_common.h"

namespace {

using bert::cpu_gemm;

std::vector<float> random_matrix(size_t elems, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> m(elems);
  for (float& x : m) x = u(rng);
  return m;
}

double sgemm_gflops(int threads) {
  constexpr int n = 2048;
  std::mt19937 rng(3);
  const std::vector<float> a = random_matrix(size_t{n} * n, rng), b = random_matrix(size_t{n} * n, rng);
  std::vector<float> c(size_t{n} * n);
  const double best = best_seconds(3, [&] {
    cpu_gemm(n, n, n, 1.0f, {a.data(), n, false}, {b.data(), n, false}, 0.0f, c.data(), n, threads);
  });
  return 2.0 * n * n * n / best * 1e-9;
}

// One layer's operands: the weight W [N, K], the layer's input X [M, K] and output gradient dY [M, N].
struct LayerOperands {
  std::vector<float> W, X, dY;
};

}  // namespace

int main(int argc, char** argv) {
  GemmBenchArgs args{.rows = 512, .layers = 24, .rounds = 3};
  if (!parse_gemm_bench_args(argc, argv, "bench_dense_shapes", args)) return 2;
  const int hidden = args.hidden, rows = args.rows, threads = args.threads, layers = args.layers, rounds = args.rounds;
  const double sgemm_before = sgemm_gflops(threads);
  std::printf("hidden %d, %d rows, %d thread(s), %d layers' operands, best of %d rounds; SGEMM 2048³ %.1f GFLOP/s\n",
              hidden, rows, threads, layers, rounds, sgemm_before);
  std::printf("%-9s %-8s %5s %5s %5s %10s %10s %7s %7s\n", "layer", "product", "M", "N", "K", "hot GF/s",
              "cold GF/s", "hot %", "cold %");
  const struct { const char* name; int n, k; } shapes[] = {
      {"qkv", 3 * hidden, hidden}, {"attn-out", hidden, hidden}, {"ffn-up", 4 * hidden, hidden},
      {"ffn-down", hidden, 4 * hidden}};
  const int64_t M = rows;
  std::mt19937 rng(5);
  std::vector<double> shares;
  for (const auto& s : shapes) {
    const int64_t N = s.n, K = s.k;
    std::vector<LayerOperands> ops(layers);
    for (auto& o : ops) {
      o.W = random_matrix(static_cast<size_t>(N * K), rng);
      o.X = random_matrix(static_cast<size_t>(M * K), rng);
      o.dY = random_matrix(static_cast<size_t>(M * N), rng);
    }
    std::vector<float> Y(static_cast<size_t>(M * N)), dX(static_cast<size_t>(M * K));
    std::vector<float> dW(static_cast<size_t>(N * K), 0.0f);
    // The three products of a layer as CpuOps::linear_fwd_impl and linear_bwd_impl call them, with
    // their GEMM's m, n, k.
    using Product = void (*)(const LayerOperands&, int64_t, int64_t, int64_t, float*, int);
    const struct { const char* name; int64_t m, n, k; Product run; float* out; } products[] = {
        {"forward", M, N, K, [](const LayerOperands& o, int64_t m, int64_t n, int64_t k, float* out, int t) {
           cpu_gemm(m, n, k, 1.0f, {o.X.data(), k, false}, {o.W.data(), k, true}, 0.0f, out, n, t);
         }, Y.data()},
        {"dX", M, K, N, [](const LayerOperands& o, int64_t m, int64_t n, int64_t k, float* out, int t) {
           cpu_gemm(m, n, k, 1.0f, {o.dY.data(), k, false}, {o.W.data(), n, false}, 0.0f, out, n, t);
         }, dX.data()},
        {"dW", N, K, M, [](const LayerOperands& o, int64_t m, int64_t n, int64_t k, float* out, int t) {
           cpu_gemm(m, n, k, 1.0f, {o.dY.data(), m, true}, {o.X.data(), n, false}, 1.0f, out, n, t);
         }, dW.data()}};
    for (const auto& p : products) {
      double best_hot = 1e30, best_cold = 1e30;
      for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
        auto t0 = std::chrono::steady_clock::now();
        for (int l = 0; l < layers; ++l) p.run(ops[0], p.m, p.n, p.k, p.out, threads);
        const double hot = seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        for (int l = 0; l < layers; ++l) p.run(ops[l], p.m, p.n, p.k, p.out, threads);
        const double cold = seconds_since(t0);
        if (r > 0) best_hot = std::min(best_hot, hot), best_cold = std::min(best_cold, cold);
      }
      const double flops = 2.0 * M * N * K * layers;
      const double hot = flops / best_hot * 1e-9, cold = flops / best_cold * 1e-9;
      shares.push_back(cold / sgemm_before);
      std::printf("%-9s %-8s %5lld %5lld %5lld %10.1f %10.1f %6.0f%% %6.0f%%\n", s.name, p.name,
                  static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k), hot, cold,
                  100.0 * hot / sgemm_before, 100.0 * cold / sgemm_before);
    }
  }
  std::printf("SGEMM 2048³ after: %.1f GFLOP/s; cold products %.0f%%-%.0f%% of the first SGEMM\n", sgemm_gflops(threads),
              100.0 * *std::min_element(shares.begin(), shares.end()),
              100.0 * *std::max_element(shares.begin(), shares.end()));
  return 0;
}
