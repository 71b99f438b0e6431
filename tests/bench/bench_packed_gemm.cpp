// The forward products of an inference call on few rows, oneDNN's sgemm (cpu_gemm) against the
// packed weights (cpu_packed_gemm.h) in the same run, and on CPUs that multiply bf16 natively
// oneDNN's bf16 GEMM (cpu_gemm_bf16) against the reordered bf16 weights (cpu_packed_gemm_bf16.h): each product of a layer (qkv, attention
// output, feed-forward up and down) on M rows, with L distinct weight sets taken in turn as the
// layers of a forward pass take theirs (L = 12: larger than the caches, so each call reads its
// weights from memory), the two timed in alternation, calls of one set after another. A benchmark:
// prints GFLOP/s per shape, asserts nothing.
//   bench_packed_gemm [--model base|large] [--rows M] [--threads T] [--layers L] [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_packed_gemm.h"
#include "backend/cpu/cpu_packed_gemm_bf16.h"
#include "bench_gemm_common.h"

int main(int argc, char** argv) {
  using namespace bert;
  GemmBenchArgs args{.rows = 128, .layers = 12, .rounds = 5};
  if (!parse_gemm_bench_args(argc, argv, "bench_packed_gemm", args)) return 2;
  const int hidden = args.hidden, rows = args.rows, threads = args.threads, layers = args.layers, rounds = args.rounds;
  if (!packed_gemm_supported()) {
    std::printf("the packed product needs AVX-512 (oneDNN sees %s): nothing to compare\n", cpu_isa_name().c_str());
    return 0;
  }
  std::printf("%d rows, %d thread(s), %d weight set(s) in turn, best of %d rounds; oneDNN ISA %s\n", rows, threads,
              layers, rounds, cpu_isa_name().c_str());
  std::printf("%-14s %6s %6s %14s %14s %7s\n", "product", "N", "K", "oneDNN GF/s", "packed GF/s", "ratio");
  const struct { const char* name; int n, k; } shapes[] = {
      {"qkv", 3 * hidden, hidden}, {"attn-out", hidden, hidden}, {"ffn-up", 4 * hidden, hidden},
      {"ffn-down", hidden, 4 * hidden}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const auto& s : shapes) {
    std::vector<float> X(static_cast<size_t>(rows) * s.k), C(static_cast<size_t>(rows) * s.n);
    for (float& x : X) x = u(rng);
    std::vector<std::vector<float>> W(layers, std::vector<float>(static_cast<size_t>(s.n) * s.k));
    std::vector<std::unique_ptr<PackedWeight>> packed;
    for (auto& w : W) {
      for (float& x : w) x = u(rng);
      packed.push_back(std::make_unique<PackedWeight>(w.data(), s.n, s.k, threads));
    }
    std::vector<float> scratch(PackedWeight::scratch_floats(rows, threads));
    double best_dnnl = 1e30, best_packed = 1e30;
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
      auto t0 = std::chrono::steady_clock::now();
      for (int l = 0; l < layers; ++l) {
        cpu_gemm(rows, s.n, s.k, 1.0f, {X.data(), s.k, false}, {W[l].data(), s.k, true}, 0.0f, C.data(), s.n, threads);
      }
      const double dnnl = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      for (int l = 0; l < layers; ++l) {
        packed[l]->multiply(rows, X.data(), s.k, nullptr, C.data(), s.n, threads, scratch.data());
      }
      const double pk = seconds_since(t0);
      if (r > 0) best_dnnl = std::min(best_dnnl, dnnl), best_packed = std::min(best_packed, pk);
    }
    const double flops = 2.0 * rows * s.n * s.k * layers * 1e-9;
    std::printf("%-14s %6d %6d %14.1f %14.1f %6.2fx\n", s.name, s.n, s.k, flops / best_dnnl, flops / best_packed,
                best_dnnl / best_packed);
    if (!cpu_has_native_bf16()) continue;
    // bf16: X and the weights rounded once (as the engine's bf16 copy), the reordered copies made
    // from the fp32 weights.
    std::vector<uint16_t> X16(X.size());
    floats_to_bf16(X16.data(), X.data(), static_cast<int64_t>(X.size()));
    std::vector<std::vector<uint16_t>> W16;
    std::vector<std::unique_ptr<PackedWeightBf16>> reordered;
    for (const auto& w : W) {
      W16.emplace_back(w.size());
      floats_to_bf16(W16.back().data(), w.data(), static_cast<int64_t>(w.size()));
      reordered.push_back(std::make_unique<PackedWeightBf16>(w.data(), s.n, s.k, threads));
    }
    double best_gemm16 = 1e30, best_reordered = 1e30;
    for (int r = 0; r <= rounds; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int l = 0; l < layers; ++l) {
        cpu_gemm_bf16(rows, s.n, s.k, 1.0f, {X16.data(), s.k, false}, {W16[l].data(), s.k, true}, 0.0f, C.data(),
                      s.n, threads);
      }
      const double gemm16 = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      for (int l = 0; l < layers; ++l) reordered[l]->multiply(rows, X16.data(), nullptr, C.data(), threads);
      const double re = seconds_since(t0);
      if (r > 0) best_gemm16 = std::min(best_gemm16, gemm16), best_reordered = std::min(best_reordered, re);
    }
    std::printf("%-14s %6d %6d %14.1f %14.1f %6.2fx   (bf16: GEMM, reordered)\n", s.name, s.n, s.k,
                flops / best_gemm16, flops / best_reordered, best_gemm16 / best_reordered);
  }
  return 0;
}
