// Dense layers on the CPU: out = act(in · W^T + b) with a oneDNN GEMM and a fused bias +
// activation epilogue, the activation alone (for recomputation), and the backward pass
// (dW, db accumulate; din overwritten or added).
// Column reductions run over rows in a fixed order, so db does not depend on the thread count.
// With bf16 GEMM inputs the products take bf16 copies (round to nearest even) of both operands.
#include <algorithm>

#include "backend/cpu/cpu_activation.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

// db[c0 + j] += Σ_i x[i·ld + c0 + j] over rows i in order, summed in double, for j < width
// (≤ kColumnBlock); a full block's inner loop has a fixed trip count, so each clone vectorises it.
BERT_CPU_CLONES_EXACT
void add_column_sums(float* db, const float* x, int64_t rows, int64_t ld, int64_t c0, int width) {
  double acc[kColumnBlock] = {};
  if (width == kColumnBlock) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int j = 0; j < kColumnBlock; ++j) acc[j] += x[i * ld + c0 + j];
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) {
      for (int j = 0; j < width; ++j) acc[j] += x[i * ld + c0 + j];
    }
  }
  for (int j = 0; j < width; ++j) db[c0 + j] += static_cast<float>(acc[j]);
}

// row[j] += b[j] for j < n.
BERT_CPU_CLONES
void add_bias(float* row, const float* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] += b[j];
}

}  // namespace

void CpuOps::set_weights(const float* params, int64_t n) {
  weights_changed();
  weights_ = params;
  weight_count_ = n;
}

void CpuOps::weights_changed() {
  weights_bf16_fresh_ = false;
  size_t freed = 0;
  for (const auto& [W, packed] : packed_) freed += packed->bytes();
  for (const auto& [W, packed] : packed_bf16_) freed += packed->bytes();
  packed_.clear();
  packed_bf16_.clear();
  count_held_bytes(-static_cast<int64_t>(freed));
}

bool CpuOps::is_weight(const float* p, int64_t elems) const {
  return weights_ != nullptr && p >= weights_ && p + elems <= weights_ + weight_count_;
}

namespace {

// map[W], made by make() when there is none or when it packs another shape (W's start read as
// another matrix); the held bytes follow. An entry is made only once packed: a failed allocation
// leaves none.
template <typename Packed, typename Make, typename Count>
Packed* find_or_pack(std::unordered_map<const float*, std::unique_ptr<Packed>>& map, const float* W, int64_t N,
                     int64_t K, Make make, Count count_held_bytes) {
  auto it = map.find(W);
  if (it != map.end() && !it->second->packs(N, K)) {
    count_held_bytes(-static_cast<int64_t>(it->second->bytes()));
    map.erase(it);
    it = map.end();
  }
  if (it == map.end()) {
    std::unique_ptr<Packed> packed = make();
    count_held_bytes(static_cast<int64_t>(packed->bytes()));
    it = map.emplace(W, std::move(packed)).first;
  }
  return it->second.get();
}

}  // namespace

const PackedWeight* CpuOps::packed_weight(const float* W, int64_t M, int64_t N, int64_t K) {
  if (!packed_gemm_ || M > kPackedGemmMaxRows || !is_weight(W, N * K)) return nullptr;
  return find_or_pack(
      packed_, W, N, K, [&] { return std::make_unique<PackedWeight>(W, N, K, threads_); },
      [this](int64_t delta) { count_held_bytes(delta); });
}

PackedWeightBf16* CpuOps::packed_weight_bf16(const float* W, int64_t N, int64_t K) {
  if (!bf16_gemm_inputs_ || !is_weight(W, N * K)) return nullptr;
  return find_or_pack(
      packed_bf16_, W, N, K, [&] { return std::make_unique<PackedWeightBf16>(W, N, K, threads_); },
      [this](int64_t delta) { count_held_bytes(delta); });
}

GemmOperand<uint16_t> CpuOps::bf16_operand(GemmOperand<float> X, int64_t rows, int64_t cols,
                                           std::vector<uint16_t>& scratch) {
  if (is_weight(X.data, rows * X.ld)) {
    if (!weights_bf16_fresh_) {
      weights_bf16_.resize(static_cast<size_t>(weight_count_));
      const int64_t chunks = (weight_count_ + kParallelElements - 1) / kParallelElements;
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kParallelElements;
        floats_to_bf16(weights_bf16_.data() + begin, weights_ + begin, std::min(kParallelElements, weight_count_ - begin));
      }
      weights_bf16_fresh_ = true;
    }
    return {weights_bf16_.data() + (X.data - weights_), X.ld, X.transposed};
  }
  scratch.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for num_threads(threads_) if (rows * cols > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) floats_to_bf16(scratch.data() + r * cols, X.data + r * X.ld, cols);
  return {scratch.data(), cols, X.transposed};
}

void CpuOps::linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<float> A, GemmOperand<float> B, float beta,
                         float* C, int64_t ldc) {
  if (!bf16_gemm_inputs_) return cpu_gemm(M, N, K, 1.0f, A, B, beta, C, ldc, threads_);
  linear_gemm(M, N, K, bf16_operand(A, A.transposed ? K : M, A.transposed ? M : K, bf16_a_), B, beta, C, ldc);
}

void CpuOps::linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<uint16_t> A, GemmOperand<float> B,
                         float beta, float* C, int64_t ldc) {
  const auto b = bf16_operand(B, B.transposed ? N : K, B.transposed ? K : N, bf16_b_);
  cpu_gemm_bf16(M, N, K, 1.0f, A, b, beta, C, ldc, threads_);
}

void CpuOps::linear_fwd_impl(const LinearFwdArgs& a) {
  float* out = a.out.f32();
  float* pre_act = a.pre_act.f32();
  const float* in = a.in.f32();
  if (a.M == 0) return;
  // With an activation the GEMM lands in pre_act and the epilogue writes out from it.
  float* gemm_out = a.act == Activation::none ? out : pre_act;  // [M, N]
  const float* bias = a.b;  // still to add
  if (const PackedWeight* packed = a.forward_only ? packed_weight(a.W, a.M, a.N, a.K) : nullptr) {
    packed_scratch_.resize(std::max(packed_scratch_.size(), PackedWeight::scratch_floats(a.M, threads_)));
    packed->multiply(a.M, in, a.K, bias, gemm_out, a.N, threads_, packed_scratch_.data());
    bias = nullptr;
  } else if (PackedWeightBf16* packed16 = a.forward_only ? packed_weight_bf16(a.W, a.N, a.K) : nullptr) {
    const GemmOperand<uint16_t> in16 = bf16_operand({in, a.K, false}, a.M, a.K, bf16_a_);  // dense: ld K
    packed16->multiply(a.M, in16.data, bias, gemm_out, threads_);
    bias = nullptr;
  } else {
    linear_gemm(a.M, a.N, a.K, {in, a.K, false}, {a.W, a.K, true}, 0.0f, gemm_out, a.N);
  }
  if (a.act == Activation::none && bias == nullptr) return;
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int64_t i = 0; i < a.M; ++i) {
    float* row = gemm_out + i * a.N;
    if (bias != nullptr) add_bias(row, bias, a.N);
    if (a.act != Activation::none) activation_array(a.act, out + i * a.N, row, a.N);
  }
}

void CpuOps::activation_fwd_impl(const ActivationFwdArgs& a) {
  float* out = a.out.f32();
  const float* pre = a.pre.f32();
  const int64_t chunks = (a.n + kParallelElements - 1) / kParallelElements;
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelElements;
    activation_array(a.act, out + begin, pre + begin, std::min(kParallelElements, a.n - begin));
  }
}

void CpuOps::linear_bwd_impl(const LinearBwdArgs& a) {
  float* din = a.din.f32();
  const float* dout = a.dout.f32();
  const float* in = a.in.f32();
  const float* pre_act = a.pre_act.f32();
  float* dpre_scratch = a.dpre_scratch.f32();
  if (a.M == 0) return;
  const float* dpre = dout;  // [M, N]
  if (a.act != Activation::none) {
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
    for (int64_t i = 0; i < a.M; ++i) {
      activation_grad_array(a.act, dpre_scratch + i * a.N, dout + i * a.N, pre_act + i * a.N, a.N);
    }
    dpre = dpre_scratch;
  }
  if (a.db != nullptr) {
    const int blocks = (a.N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * kColumnBlock;
      add_column_sums(a.db, dpre, a.M, a.N, c0, std::min(a.N - c0, kColumnBlock));
    }
  }
  // dW[N,K] += dpreᵀ[N,M] · in[M,K];  din[M,K] (+)= dpre[M,N] · W[N,K]: both at once (cpu_gemm_pair)
  // when both are wanted.
  const float din_beta = a.accumulate_din ? 1.0f : 0.0f;
  if (bf16_gemm_inputs_) {  // dpre converted once for both products
    const GemmOperand<uint16_t> dpre16 = bf16_operand({dpre, a.N, false}, a.M, a.N, bf16_a_);
    if (a.dW != nullptr && din != nullptr) {
      const GemmOperand<uint16_t> in16 = bf16_operand({in, a.K, false}, a.M, a.K, bf16_b_);
      const GemmOperand<uint16_t> W16 = bf16_operand({a.W, a.K, false}, a.N, a.K, bf16_c_);
      return cpu_gemm_pair_bf16({a.N, a.K, a.M, {dpre16.data, dpre16.ld, true}, in16, 1.0f, a.dW, a.K},
                                {a.M, a.K, a.N, dpre16, W16, din_beta, din, a.K}, threads_);
    }
    if (a.dW != nullptr) linear_gemm(a.N, a.K, a.M, {dpre16.data, dpre16.ld, true}, {in, a.K, false}, 1.0f, a.dW, a.K);
    if (din != nullptr) linear_gemm(a.M, a.K, a.N, dpre16, {a.W, a.K, false}, din_beta, din, a.K);
    return;
  }
  if (a.dW != nullptr && din != nullptr) {
    return cpu_gemm_pair({a.N, a.K, a.M, {dpre, a.N, true}, {in, a.K, false}, 1.0f, a.dW, a.K},
                         {a.M, a.K, a.N, {dpre, a.N, false}, {a.W, a.K, false}, din_beta, din, a.K}, threads_);
  }
  if (a.dW != nullptr) linear_gemm(a.N, a.K, a.M, {dpre, a.N, true}, {in, a.K, false}, 1.0f, a.dW, a.K);
  if (din != nullptr) linear_gemm(a.M, a.K, a.N, {dpre, a.N, false}, {a.W, a.K, false}, din_beta, din, a.K);
}

}  // namespace bert
