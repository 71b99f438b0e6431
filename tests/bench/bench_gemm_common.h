// What the GEMM benchmarks share (bench_sgemm, bench_packed_gemm, bench_dense_shapes): their
// timing helpers, and the command line of the last two:
//   [--model base|large] [--rows M] [--threads T] [--layers L] [--rounds R]
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best seconds of `reps` timed calls of f after one warm-up call.
template <typename F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

struct GemmBenchArgs {
  int hidden = 768;  // --model base (768) or large (1024)
  int rows, threads = 1, layers, rounds;
};

// Reads argv into `a` (its fields hold the defaults); on an unknown option or a value below 1
// prints why on stderr and returns false (the program then exits with status 2).
inline bool parse_gemm_bench_args(int argc, char** argv, const char* program, GemmBenchArgs& a) {
  for (int i = 1; i < argc; i += 2) {
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value && !std::strcmp(argv[i], "--model")) a.hidden = std::strcmp(value, "large") ? 768 : 1024;
    else if (value && !std::strcmp(argv[i], "--rows")) a.rows = std::atoi(value);
    else if (value && !std::strcmp(argv[i], "--threads")) a.threads = std::atoi(value);
    else if (value && !std::strcmp(argv[i], "--layers")) a.layers = std::atoi(value);
    else if (value && !std::strcmp(argv[i], "--rounds")) a.rounds = std::atoi(value);
    else {
      std::fprintf(stderr, "usage: %s [--model base|large] [--rows M] [--threads T] [--layers L] [--rounds R]\n",
                   program);
      return false;
    }
  }
  if (a.rows < 1 || a.threads < 1 || a.layers < 1 || a.rounds < 1) {
    std::fprintf(stderr, "%s: --rows, --threads, --layers and --rounds must be at least 1\n", program);
    return false;
  }
  return true;
}
