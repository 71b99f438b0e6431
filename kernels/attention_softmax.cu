// Fused scale + additive key mask + softmax (+ Philox dropout) over attention scores, and its
// backward, for the reference attention path (the GEMMs run in cuBLASLt). One launch covers every
// sequence of the batch: blockIdx.y is the sequence, and each warp of a block takes one query row
// of that sequence's [heads·L, L] block. The dropout element index is the index in the saved
// probabilities array (probs_offset + row·L + key), as on the CPU. Scores, probabilities and their
// gradients are of any activation storage type: each pass recomputes its fp32 values from the
// stored input (the same bits every pass), so only the result is rounded to the storage type.
#include "kernels/attention_softmax.h"
#include "common.cuh"
#include "core/philox.h"

namespace bert::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxSequences = 65535;  // gridDim.y

__device__ __forceinline__ bool keep_element(const DropoutSite& site, int64_t index) {
  return philox_uniform_at(site.seed, step_of(site), site.tensor_id, static_cast<uint64_t>(index)) >=
         site.p;
}

// The warp's query row: its first element's index in probs and the sequence's first token and
// length; false when the block's sequence has fewer rows than this warp's.
struct Row {
  int64_t first = 0;  // index of the row's first element in probs
  int64_t token = 0;  // the sequence's first token (its key_bias)
  int L = 0;
};

__device__ __forceinline__ bool row_of(const SoftmaxSequences& seqs, int heads, Row& row) {
  const int b = blockIdx.y;
  int64_t offset;
  if (seqs.table == nullptr) {
    row.L = seqs.len;
    row.token = int64_t(b) * seqs.len;
    offset = row.token * heads * seqs.len;
  } else {
    row.token = seqs.table[b];
    row.L = static_cast<int>(seqs.table[b + 1] - row.token);
    offset = seqs.table[seqs.num_seqs + 1 + b];
  }
  const int64_t r = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
  if (r >= int64_t(heads) * row.L) return false;
  row.first = offset + r * row.L;
  return true;
}

template <typename T>
__global__ void softmax_fwd_kernel(T* probs, T* dropped, const float* key_bias, SoftmaxSequences seqs, int heads,
                                   float scale, DropoutSite site, float keep_scale) {
  Row row;
  if (!row_of(seqs, heads, row)) return;
  const int lane = threadIdx.x & 31, L = row.L;
  T* p = probs + row.first;  // [L] scores in, probabilities out
  const float* bias = key_bias + row.token;
  // The scaled, masked score of key k (no FMA: as on the CPU).
  auto score = [&](int k) { return __fmul_rn(load(p + k), scale) + bias[k]; };
  float row_max = -INFINITY;
  for (int k = lane; k < L; k += 32) row_max = fmaxf(row_max, score(k));
  row_max = warp_max(row_max);
  float sum = 0.0f;
  for (int k = lane; k < L; k += 32) sum += expf(score(k) - row_max);
  sum = warp_sum(sum);
  for (int k = lane; k < L; k += 32) {
    const float prob = expf(score(k) - row_max) / sum;
    store(p + k, prob);
    if (dropped != nullptr)
      store(dropped + row.first + k, keep_element(site, row.first + k) ? __fmul_rn(prob, keep_scale) : 0.0f);
  }
}

template <typename T>
__global__ void softmax_bwd_kernel(T* dgrad, const T* probs, SoftmaxSequences seqs, int heads, float scale,
                                   DropoutSite site, float keep_scale) {
  Row row;
  if (!row_of(seqs, heads, row)) return;
  const int lane = threadIdx.x & 31, L = row.L;
  T* d = dgrad + row.first;        // [L] d(dropout(P)) in, d(scores) out
  const T* p = probs + row.first;  // [L]
  // d(P) of key k: the incoming gradient through the dropout mask.
  auto dprob = [&](int k) {
    const float dp = load(d + k);
    return site.p == 0.0f ? dp : (keep_element(site, row.first + k) ? dp * keep_scale : 0.0f);
  };
  float dot = 0.0f;
  for (int k = lane; k < L; k += 32) dot += load(p + k) * dprob(k);
  dot = warp_sum(dot);
  for (int k = lane; k < L; k += 32) store(d + k, __fmul_rn(load(p + k), dprob(k) - dot) * scale);
}

// Blocks: enough warps for the longest sequence's rows, one grid row per sequence.
dim3 grid_of(const SoftmaxSequences& seqs, int heads) {
  BERT_CHECK(seqs.num_seqs <= kMaxSequences, Code::unsupported, "attention softmax: ",
             seqs.num_seqs, " sequences in one batch; at most ", kMaxSequences);
  return dim3(static_cast<unsigned>(ceil_div(int64_t(heads) * seqs.len, kWarpsPerBlock)),
              static_cast<unsigned>(seqs.num_seqs));
}

}  // namespace

void attention_softmax_fwd(Act probs, Act dropped, const float* key_bias, const SoftmaxSequences& seqs, int heads,
                           float scale, const DropoutSite& site, float keep_scale, cudaStream_t stream) {
  if (seqs.num_seqs == 0 || seqs.len == 0 || heads == 0) return;
  with_storage(common_storage("attention_softmax_fwd", {probs, dropped}), [&](auto tag) {
    using T = decltype(tag);
    softmax_fwd_kernel<T><<<grid_of(seqs, heads), kWarpsPerBlock * 32, 0, stream>>>(
        typed<T>(probs), typed<T>(dropped), key_bias, seqs, heads, scale, site, keep_scale);
  });
  CUDA_CHECK(cudaGetLastError());
}

void attention_softmax_bwd(Act dgrad, ConstAct probs, const SoftmaxSequences& seqs, int heads, float scale,
                           const DropoutSite& site, float keep_scale, cudaStream_t stream) {
  if (seqs.num_seqs == 0 || seqs.len == 0 || heads == 0) return;
  with_storage(common_storage("attention_softmax_bwd", {dgrad, probs}), [&](auto tag) {
    using T = decltype(tag);
    softmax_bwd_kernel<T><<<grid_of(seqs, heads), kWarpsPerBlock * 32, 0, stream>>>(
        typed<T>(dgrad), typed<T>(probs), seqs, heads, scale, site, keep_scale);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
