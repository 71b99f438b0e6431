// Softmax cross-entropy fused with its gradient, one block per row of logits[M, ld] over the
// first V columns (columns V..ld-1 are padding: excluded, gradient 0). Rows with a negative
// label are ignored (loss 0, not correct, gradient 0). argmax takes the first maximal column.
// Labels >= V are counted on the device (block 0 scans them into a status word the host reads
// at its next synchronisation), so the launch needs no host copy of the labels and no sync.
// Logits and their gradient are of any activation storage type; the loss arithmetic is fp32.
#include "kernels/softmax_xent.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

// Block 0's extra duty: status[0] += labels >= V among labels[0, rows); when status[0] was 0,
// status[1..3] receive the first such row, its label and V (fixed-order reductions).
__device__ void count_bad_labels(int32_t* status, const int32_t* labels, int rows, int V) {
  __shared__ int s_count[32];
  __shared__ int s_first[32];
  int count = 0, first = rows;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    if (labels[i] >= V) {
      ++count;
      first = min(first, i);
    }
  }
  count = block_sum(count, s_count);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1)
    first = min(first, __shfl_xor_sync(0xffffffffu, first, offset));
  if (lane == 0) s_first[warp] = first;
  __syncthreads();
  first = lane < warps ? s_first[lane] : rows;
  for (int offset = 16; offset > 0; offset >>= 1)
    first = min(first, __shfl_xor_sync(0xffffffffu, first, offset));
  if (threadIdx.x == 0 && count > 0) {
    if (status[0] == 0) {
      status[1] = first;
      status[2] = labels[first];
      status[3] = V;
    }
    status[0] += count;
  }
}

template <typename T>
__global__ void softmax_xent_kernel(T* dlogits, float* losses, int32_t* correct, const T* logits,
                                    const int32_t* labels, int V, int ld, ScaleArg grad_scale_arg,
                                    int32_t* label_status, int rows) {
  __shared__ float s_max[32];
  __shared__ int s_idx[32];
  __shared__ float s_sum[32];
  if (blockIdx.x == 0) count_bad_labels(label_status, labels, rows, V);
  const float grad_scale = value_of(grad_scale_arg);
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;  // [ld]
  T* dx = dlogits + row * ld;      // [ld] (may alias x)
  const int label = labels[row];
  if (label < 0) {
    for (int j = threadIdx.x; j < ld; j += blockDim.x) store(dx + j, 0.0f);
    if (threadIdx.x == 0) {
      losses[row] = 0.0f;
      if (correct != nullptr) correct[row] = 0;
    }
    return;
  }
  // Max and first argmax: each thread scans increasing columns, then a fixed-order tree that
  // prefers the lower index on ties.
  float best = -INFINITY;
  int best_idx = V;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float v = load(x + j);
    if (v > best) {
      best = v;
      best_idx = j;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, best_idx, offset);
    if (ov > best || (ov == best && oi < best_idx)) {
      best = ov;
      best_idx = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    s_max[warp] = best;
    s_idx[warp] = best_idx;
  }
  __syncthreads();
  best = lane < warps ? s_max[lane] : -INFINITY;
  best_idx = lane < warps ? s_idx[lane] : V;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, best_idx, offset);
    if (ov > best || (ov == best && oi < best_idx)) {
      best = ov;
      best_idx = oi;
    }
  }
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf(load(x + j) - best);
  sum = block_sum(sum, s_sum);
  const float label_logit = label < V ? load(x + label) : NAN;
  __syncthreads();  // every thread has read x[label] before dx (which may alias x) is written
  if (threadIdx.x == 0) {
    losses[row] = logf(sum) + best - label_logit;
    if (correct != nullptr) correct[row] = best_idx == label ? 1 : 0;
  }
  const float inv_sum = 1.0f / sum;
  for (int j = threadIdx.x; j < ld; j += blockDim.x) {
    float g = 0.0f;
    if (j < V) g = (expf(load(x + j) - best) * inv_sum - (j == label ? 1.0f : 0.0f)) * grad_scale;
    store(dx + j, g);
  }
}

}  // namespace

void softmax_xent(Act dlogits, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels, int64_t M,
                  int V, int ld, ScaleArg grad_scale, int32_t* label_status, cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "softmax_xent: ", M, " rows is too many");
  with_storage(common_storage("softmax_xent", {dlogits, logits}), [&](auto tag) {
    using T = decltype(tag);
    softmax_xent_kernel<T><<<static_cast<unsigned>(M), 512, 0, stream>>>(
        typed<T>(dlogits), losses, correct, typed<T>(logits), labels, V, ld, grad_scale, label_status,
        static_cast<int>(M));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
