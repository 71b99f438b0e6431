// The command line shared by the GEMM benchmarks (bench_packed_gemm, bench_dense_shapes):
//   [--model base|large] [--rows M] [--threads T] [--layers L] [--rounds R]
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
