// Embedding forward: out[t] = word[word_ids[t]] + pos[pos_ids[t]] + type[type_ids[t]], summed
// left to right as on the CPU in fp32, stored in the activation type. The backward is three
// deterministic scatter-adds (rows.cu).
#include "kernels/embedding.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

// One block per token row t; threads walk the H columns.
template <typename T>
__global__ void embedding_fwd_kernel(T* out, const int32_t* word_ids, const int32_t* pos_ids,
                                     const int32_t* type_ids, const float* word_emb,
                                     const float* pos_emb, const float* type_emb, int H) {
  const int64_t t = blockIdx.x;
  const float* w = word_emb + static_cast<int64_t>(word_ids[t]) * H;
  const float* p = pos_emb + static_cast<int64_t>(pos_ids[t]) * H;
  const float* s = type_emb + static_cast<int64_t>(type_ids[t]) * H;
  T* y = out + t * H;  // [H]
  for (int j = threadIdx.x; j < H; j += blockDim.x) store(y + j, w[j] + p[j] + s[j]);
}

}  // namespace

void embedding_fwd(Act out, const int32_t* word_ids, const int32_t* pos_ids,
                   const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                   const float* type_emb, int64_t T, int H, cudaStream_t stream) {
  if (T == 0) return;
  BERT_CHECK(T <= 0x7fffffff, Code::invalid_argument, "embedding_fwd: ", T, " tokens is too many");
  with_storage(out.type, [&](auto tag) {
    using S = decltype(tag);
    embedding_fwd_kernel<S><<<static_cast<unsigned>(T), kThreads, 0, stream>>>(
        typed<S>(out), word_ids, pos_ids, type_ids, word_emb, pos_emb, type_emb, H);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
