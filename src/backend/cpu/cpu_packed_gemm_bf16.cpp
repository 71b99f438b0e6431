// The reordered bf16 weights: W rounded to bf16 row by row (floats_to_bf16), then oneDNN's reorder
// into the layout its matmul primitive picks for weights of this shape (format "any"); one matmul
// primitive per number of rows, with or without bias, made on first use and kept, at most
// kMaxPrimitives of them.
#include "backend/cpu/cpu_packed_gemm_bf16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "core/error.h"

namespace bert {
namespace {

// X's rows up to the last multiple of kRowBlock are multiplied in one call, and the rest, padded
// with zero rows to a multiple of kRowQuantum, in another: every shape is a multiple of kRowBlock
// or of kRowQuantum below it, so an inference service whose batches have any number of tokens
// (unpadded, "data.unpad") makes few primitives in all (one costs 0.2-0.5 ms to make; bert-base
// makes about 50 for a shape).
constexpr int64_t kRowBlock = 512, kRowQuantum = 32;
constexpr size_t kMaxPrimitives = 48;

using dnnl::memory;
using Dims = memory::dims;

// A dense row-major matrix.
memory::desc matrix(int64_t rows, int64_t cols, memory::data_type type) {
  return memory::desc(Dims{rows, cols}, type, memory::format_tag::ab);
}

// A oneDNN failure as the engine's code: out of memory, or an internal error.
Code code_of(const dnnl::error& e) {
  return e.status == dnnl_out_of_memory ? Code::out_of_memory : Code::internal;
}

}  // namespace

struct PackedWeightBf16::Dnnl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  memory weights;  // Wᵀ [K, N] in the matmul's layout
  std::map<std::pair<int64_t, bool>, dnnl::matmul> by_shape;  // (M, bias)
  std::vector<uint16_t> padded_x;  // the last rows of X, padded to kRowQuantum rows
  std::vector<float> padded_c;     // their product

  dnnl::matmul::primitive_desc describe(int64_t M, int64_t K, int64_t N, bool bias,
                                        const memory::desc& weights_desc) const {
    const memory::desc bias_desc = bias ? matrix(1, N, memory::data_type::f32) : memory::desc();
    return dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(matrix(M, K, memory::data_type::bf16), weights_desc, bias_desc,
                           matrix(M, N, memory::data_type::f32)),
        engine);
  }
};

PackedWeightBf16::PackedWeightBf16(const float* W, int64_t N, int64_t K, int threads)
    : N_(N), K_(K), dnnl_(std::make_unique<Dnnl>()) {
  std::vector<uint16_t> rounded(static_cast<size_t>(N * K));
#pragma omp parallel for num_threads(threads)
  for (int64_t n = 0; n < N; ++n) floats_to_bf16(rounded.data() + n * K, W + n * K, K);
  try {
    const memory::desc any(Dims{K, N}, memory::data_type::bf16, memory::format_tag::any);
    const auto pd = dnnl_->describe(1, K, N, false, any);
    memory plain(memory::desc(Dims{K, N}, memory::data_type::bf16, memory::format_tag::ba), dnnl_->engine,
                 rounded.data());
    dnnl_->weights = memory(pd.weights_desc(), dnnl_->engine);
    ScopedTeamSize team(threads);
    dnnl::reorder(plain, dnnl_->weights).execute(dnnl_->stream, plain, dnnl_->weights);
    dnnl_->stream.wait();
  } catch (const dnnl::error& e) {
    fail(code_of(e), "cpu backend: oneDNN cannot reorder a ", N, " x ", K, " bf16 weight matrix (", e.what(), ")");
  }
}

PackedWeightBf16::~PackedWeightBf16() = default;

size_t PackedWeightBf16::bytes() const { return dnnl_->weights.get_desc().get_size(); }

size_t PackedWeightBf16::primitives() const { return dnnl_->by_shape.size(); }

void PackedWeightBf16::run(int64_t M, const uint16_t* X, const float* bias, float* C, int threads) {
  try {
    const auto key = std::make_pair(M, bias != nullptr);
    auto it = dnnl_->by_shape.find(key);
    if (it == dnnl_->by_shape.end()) {
      if (dnnl_->by_shape.size() >= kMaxPrimitives) dnnl_->by_shape.clear();
      const auto pd = dnnl_->describe(M, K_, N_, bias != nullptr, dnnl_->weights.get_desc());
      it = dnnl_->by_shape.emplace(key, dnnl::matmul(pd)).first;
    }
    memory x(matrix(M, K_, memory::data_type::bf16), dnnl_->engine, const_cast<uint16_t*>(X));
    memory c(matrix(M, N_, memory::data_type::f32), dnnl_->engine, C);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, dnnl_->weights}, {DNNL_ARG_DST, c}};
    if (bias != nullptr) {
      args[DNNL_ARG_BIAS] = memory(matrix(1, N_, memory::data_type::f32), dnnl_->engine, const_cast<float*>(bias));
    }
    ScopedTeamSize team(threads);
    it->second.execute(dnnl_->stream, args);
    dnnl_->stream.wait();
  } catch (const dnnl::error& e) {
    fail(code_of(e), "cpu backend: oneDNN's bf16 matmul failed for M=", M, " N=", N_, " K=", K_, " (", e.what(), ")");
  }
}

void PackedWeightBf16::multiply(int64_t M, const uint16_t* X, const float* bias, float* C, int threads) {
  const int64_t whole = M / kRowBlock * kRowBlock;
  if (whole > 0) run(whole, X, bias, C, threads);
  const int64_t rest = M - whole, padded = (rest + kRowQuantum - 1) / kRowQuantum * kRowQuantum;
  if (rest == padded) {
    if (rest > 0) run(rest, X + whole * K_, bias, C + whole * N_, threads);
    return;
  }
  std::vector<uint16_t>& x = dnnl_->padded_x;
  std::vector<float>& c = dnnl_->padded_c;
  x.assign(static_cast<size_t>(padded * K_), 0);  // zero rows past the rest (bf16 bits of +0)
  c.resize(static_cast<size_t>(padded * N_));
  std::copy_n(X + whole * K_, rest * K_, x.begin());
  run(padded, x.data(), bias, c.data(), threads);
  std::copy_n(c.begin(), rest * N_, C + whole * N_);
}

}  // namespace bert
