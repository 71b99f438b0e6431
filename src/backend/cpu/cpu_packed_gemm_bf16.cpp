// The reordered bf16 weights: W rounded to bf16 row by row (floats_to_bf16), then oneDNN's reorder
// into the layout its matmul primitive picks for weights of this shape (format "any"); one matmul
// primitive per number of rows, with or without bias, made on first use and kept, at most
// kMaxPrimitives of them (an inference service with many batch shapes makes them anew).
#include "backend/cpu/cpu_packed_gemm_bf16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr size_t kMaxPrimitives = 32;

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

void PackedWeightBf16::multiply(int64_t M, const uint16_t* X, const float* bias, float* C, int threads) {
  if (M == 0) return;
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

}  // namespace bert
