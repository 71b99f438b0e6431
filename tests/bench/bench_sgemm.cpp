// The machine's SGEMM rate through the engine's own CPU GEMM (src/backend/cpu/cpu_gemm.h): a
// square N³ product on T threads, best of R timed repetitions after a warm-up, printed as one JSON
// line (with --bf16 1 also the bf16-input GEMM's rate where the CPU has native bf16).
// bench_vs_torch.py divides the engine's model FLOP/s by it. A benchmark: asserts nothing.
//   bench_sgemm [--n 2048] [--threads T] [--reps 5] [--bf16 0|1]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "core/half.h"
#include "bench_gemm_common.h"

int main(int argc, char** argv) {
  int n = 2048, threads = omp_get_num_procs(), reps = 5;
  bool bf16 = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bf16")) bf16 = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "usage: bench_sgemm [--n N] [--threads T] [--reps R] [--bf16 0|1]\n");
      return 2;
    }
  }
  const size_t elems = static_cast<size_t>(n) * n;
  std::vector<float> a(elems), b(elems), c(elems);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) a[i] = u(rng), b[i] = u(rng);
  const auto best_of = [reps](auto&& f) { return best_seconds(reps, f); };
  const double flops = 2.0 * n * n * n;
  const double fp32 = best_of([&] {
    bert::cpu_gemm(n, n, n, 1.0f, {a.data(), n, false}, {b.data(), n, false}, 0.0f, c.data(), n, threads);
  });
  std::printf("{\"n\": %d, \"threads\": %d, \"isa\": \"%s\", \"sgemm_gflops\": %.2f", n, threads,
              bert::cpu_isa_name().c_str(), flops / fp32 * 1e-9);
  if (bf16 && bert::cpu_has_native_bf16()) {
    std::vector<uint16_t> a16(elems), b16(elems);
    for (size_t i = 0; i < elems; ++i) a16[i] = bert::float_to_bf16_bits(a[i]), b16[i] = bert::float_to_bf16_bits(b[i]);
    const double half = best_of([&] {
      bert::cpu_gemm_bf16(n, n, n, 1.0f, {a16.data(), n, false}, {b16.data(), n, false}, 0.0f, c.data(), n, threads);
    });
    std::printf(", \"bf16_gemm_gflops\": %.2f", flops / half * 1e-9);
  }
  std::printf("}\n");
  return 0;
}
