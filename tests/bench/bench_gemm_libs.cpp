// Which GEMM library should the CPU backend call? Times the single-precision GEMMs of one BERT
// training step (forward Y = X·Wᵀ, backward dX = dY·W and dW += dYᵀ·X, the MLM decoder) in every
// candidate found on this machine, on 1 thread and on all cores, in the same run: Eigen as this
// program was compiled (the engine's old path) and, loaded with dlopen so that each keeps its own
// symbols, OpenBLAS (Debian's DYNAMIC_ARCH build, OpenMP), BLIS (OpenMP) and oneDNN. Each shape
// repeats one operand set (cache-hot); with --layers L a second column per library times calls
// that take L distinct operand sets in turn, as a step's calls take each layer's weights and
// activations (with sets larger than the caches every call reads its operands from memory), the
// two timed in alternation. A benchmark: prints GFLOP/s per shape and library, asserts nothing.
//
// usage: bench_gemm_libs [--model base|small] [--tokens M] [--threads T] [--min-seconds S] [--layers L]
#include <dlfcn.h>
#include <omp.h>

#include <Eigen/Core>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;

// A row-major GEMM: C[M,N] = op(A)·op(B) + beta·C, op(A) is [M,K], op(B) is [K,N].
struct Shape {
  const char* what;
  bool trans_a, trans_b;
  int M, N, K;
  float beta;
};

// Every library as one call: (shape, A, B, C).
using GemmFn = std::function<void(const Shape&, const float*, const float*, float*)>;

struct Library {
  std::string name;
  GemmFn gemm;
  std::function<void(int)> set_threads;
};

// CBLAS as OpenBLAS and BLIS export it.
enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                            float, float*, int);
// oneDNN: row-major, transposition as 'N'/'T'.
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

void* open_library(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

void add_cblas(std::vector<Library>& libs, const char* name, const char* path, const char* threads_symbol) {
  void* handle = open_library(path);
  if (handle == nullptr) {
    std::printf("# %s: not found (%s)\n", name, path);
    return;
  }
  auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(handle, "cblas_sgemm"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(handle, threads_symbol));
  if (sgemm == nullptr || set_threads == nullptr) {
    std::printf("# %s: cblas_sgemm or %s missing\n", name, threads_symbol);
    return;
  }
  libs.push_back({name,
                  [sgemm](const Shape& s, const float* A, const float* B, float* C) {
                    sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans, s.M, s.N,
                          s.K, 1.0f, A, s.trans_a ? s.M : s.K, B, s.trans_b ? s.K : s.N, s.beta, C, s.N);
                  },
                  [set_threads](int t) { set_threads(t); }});
}

void add_onednn(std::vector<Library>& libs) {
  void* handle = open_library("libdnnl.so.2");
  if (handle == nullptr) handle = open_library("libdnnl.so.3");
  if (handle == nullptr) {
    std::printf("# onednn: not found\n");
    return;
  }
  auto sgemm = reinterpret_cast<DnnlSgemm>(dlsym(handle, "dnnl_sgemm"));
  if (sgemm == nullptr) return;
  libs.push_back({"onednn",
                  [sgemm](const Shape& s, const float* A, const float* B, float* C) {
                    sgemm(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.M, s.N, s.K, 1.0f, A,
                          s.trans_a ? s.M : s.K, B, s.trans_b ? s.K : s.N, s.beta, C, s.N);
                  },
                  [](int t) { omp_set_num_threads(t); }});
}

void add_eigen(std::vector<Library>& libs) {
  libs.push_back({"eigen",
                  [](const Shape& s, const float* A, const float* B, float* C) {
                    Map c(C, s.M, s.N);
                    ConstMap a(A, s.trans_a ? s.K : s.M, s.trans_a ? s.M : s.K);
                    ConstMap b(B, s.trans_b ? s.N : s.K, s.trans_b ? s.K : s.N);
                    if (s.beta == 0.0f) c.setZero();
                    if (s.trans_a && !s.trans_b) c.noalias() += a.transpose() * b;
                    else if (!s.trans_a && s.trans_b) c.noalias() += a * b.transpose();
                    else if (!s.trans_a && !s.trans_b) c.noalias() += a * b;
                    else c.noalias() += a.transpose() * b.transpose();
                  },
                  [](int t) { Eigen::setNbThreads(t); }});
}

// The GEMMs of one training step of a BERT with hidden size H and intermediate size I on M
// tokens (P masked positions): each dense layer forward, its input gradient and its weight gradient.
std::vector<Shape> step_shapes(int M, int H, int I, int P, int V) {
  std::vector<Shape> shapes;
  const struct { const char* name; int in, out; } layers[] = {
      {"qkv", H, 3 * H}, {"attn-out", H, H}, {"ffn-up", H, I}, {"ffn-down", I, H}};
  for (const auto& l : layers) {
    shapes.push_back({l.name, false, true, M, l.out, l.in, 0.0f});   // Y = X·Wᵀ
    shapes.push_back({l.name, false, false, M, l.in, l.out, 0.0f});  // dX = dY·W
    shapes.push_back({l.name, true, false, l.out, l.in, M, 1.0f});   // dW += dYᵀ·X
  }
  shapes.push_back({"mlm-decoder", false, true, P, V, H, 0.0f});
  shapes.push_back({"mlm-decoder", false, false, P, H, V, 0.0f});
  shapes.push_back({"mlm-decoder", true, false, V, H, P, 1.0f});
  return shapes;
}

const char* kind(const Shape& s) { return s.trans_a ? "dW" : (s.trans_b ? "fwd" : "dX"); }

// `sets` random operand sets (A, B, C) of shape s.
struct OperandSets {
  std::vector<std::vector<float>> A, B, C;
};

OperandSets make_operands(const Shape& s, int sets) {
  const size_t a = size_t(s.M) * s.K, b = size_t(s.K) * s.N, c = size_t(s.M) * s.N;
  OperandSets o{std::vector<std::vector<float>>(sets, std::vector<float>(a)),
                std::vector<std::vector<float>>(sets, std::vector<float>(b)),
                std::vector<std::vector<float>>(sets, std::vector<float>(c))};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int l = 0; l < sets; ++l) {
    for (auto& x : o.A[l]) x = u(rng);
    for (auto& x : o.B[l]) x = u(rng);
  }
  return o;
}

struct Timing {
  double seconds = 0, flops = 0;
  double gflops() const { return flops / seconds * 1e-9; }
};

// Adds to t at least `seconds` of calls of `lib` on s, call i on operand set i mod `use`.
void time_calls(const Library& lib, const Shape& s, OperandSets& o, int use, double seconds, Timing& t) {
  int reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    const int l = reps % use;
    lib.gemm(s, o.A[l].data(), o.B[l].data(), o.C[l].data());
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < seconds || reps < use);
  t.seconds += elapsed;
  t.flops += 2.0 * s.M * s.N * s.K * reps;
}

// GFLOP/s of `lib` on s on one operand set (hot) and, when layers > 1, on `layers` sets in turn
// (cold): after one warm-up call per set, two rounds of min_seconds / 2 each, alternating.
std::pair<double, double> time_gemm(const Library& lib, const Shape& s, double min_seconds, int layers) {
  OperandSets o = make_operands(s, layers);
  for (int l = 0; l < layers; ++l) lib.gemm(s, o.A[l].data(), o.B[l].data(), o.C[l].data());
  Timing hot, cold;
  for (int round = 0; round < 2; ++round) {
    time_calls(lib, s, o, 1, min_seconds / 2, hot);
    if (layers > 1) time_calls(lib, s, o, layers, min_seconds / 2, cold);
  }
  return {hot.gflops(), layers > 1 ? cold.gflops() : 0.0};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "base";
  int tokens = 1024, max_threads = omp_get_num_procs();
  double min_seconds = 0.3;
  int layers = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) max_threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--min-seconds")) min_seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--layers")) layers = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_gemm_libs [--model base|small] [--tokens M] [--threads T] [--min-seconds S] "
                           "[--layers L]\n");
      return 2;
    }
  }
  if (layers < 1) {
    std::fprintf(stderr, "bench_gemm_libs: --layers must be at least 1\n");
    return 2;
  }
  const int H = model == "small" ? 512 : 768, I = 4 * H, P = tokens * 20 / 128, V = 30522;

  std::vector<Library> libs;
  add_eigen(libs);
  add_cblas(libs, "openblas", "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
            "openblas_set_num_threads");
  add_cblas(libs, "blis", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4", "bli_thread_set_num_threads");
  add_onednn(libs);

  std::vector<int> thread_counts = {1};
  if (max_threads > 1) thread_counts.push_back(max_threads);
  const auto shapes = step_shapes(tokens, H, I, P, V);
  const Shape square = {"square-2048", false, false, 2048, 2048, 2048, 0.0f};
  std::printf("bert-%s, %d tokens; GFLOP/s (higher is better)", model.c_str(), tokens);
  if (layers > 1) std::printf("; LIB/%d: %d operand sets in turn (from memory, as in a step)", layers, layers);
  std::printf("\n");
  const int columns = layers > 1 ? 2 : 1;  // per library: hot and, with --layers, from memory
  for (int t : thread_counts) {
    std::printf("\n%d thread(s)\n%-12s %-4s %6s %6s %6s", t, "layer", "kind", "M", "N", "K");
    for (const auto& lib : libs) {
      std::printf(" %9s", lib.name.c_str());
      if (columns == 2) std::printf(" %9s", (lib.name + "/" + std::to_string(layers)).c_str());
    }
    std::printf("\n");
    for (const auto& lib : libs) lib.set_threads(t);
    std::vector<double> flops(libs.size() * columns, 0.0), seconds(libs.size() * columns, 0.0);
    const auto print_row = [&](const Shape& s, bool add_to_total) {
      std::printf("%-12s %-4s %6d %6d %6d", s.what, add_to_total ? kind(s) : "", s.M, s.N, s.K);
      for (size_t l = 0; l < libs.size(); ++l) {
        const auto [hot, cold] = time_gemm(libs[l], s, min_seconds, layers);
        const double rates[2] = {hot, cold};
        for (int c = 0; c < columns; ++c) {
          std::printf(" %9.1f", rates[c]);
          if (!add_to_total) continue;
          flops[l * columns + c] += 2.0 * s.M * s.N * s.K;
          seconds[l * columns + c] += 2.0 * s.M * s.N * s.K / (rates[c] * 1e9);
        }
      }
      std::printf("\n");
    };
    for (const Shape& s : shapes) print_row(s, true);
    std::printf("%-12s %-4s %6s %6s %6s", "step total", "", "", "", "");
    for (size_t i = 0; i < flops.size(); ++i) std::printf(" %9.1f", flops[i] / seconds[i] * 1e-9);
    std::printf("\n");
    print_row(square, false);
  }
  return 0;
}
