// FusedAttention: Ops::attention_fwd/bwd through cuDNN's fused scaled-dot-product attention
// (cudnn-frontend graph API, flash-attention style: no [L, L] probabilities are materialised).
// Inputs and outputs stay fp32 at the Ops boundary and are cast to 16-bit around cuDNN; the
// softmax statistics (heads · total_tokens floats) go into the caller's probs buffer.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "backend/cuda/cuda_memory.h"
#include "backend/ops.h"
#include "kernels/cast.h"

namespace bert {

class FusedAttention {
 public:
  virtual ~FusedAttention() = default;
  // Whether this GPU runs `layout` fused. cuDNN's backward takes variable-length (ragged)
  // batches only on Hopper-class GPUs; elsewhere those batches use the reference attention
  // (the caller picks per call, the same way in both directions).
  virtual bool supports(const AttentionLayout& layout) const = 0;
  // Ops::attention_fwd semantics for every query row that is not padding (padded query rows of
  // ctx are 0); stats [heads · total_tokens] replace the reference's probabilities. Dropout
  // masks come from cuDNN's Philox stream keyed by the site, not the engine's.
  virtual void forward(float* ctx, float* stats, const float* qkv, const float* key_bias,
                       const AttentionLayout& layout, int heads, int head_dim,
                       const DropoutSite& site) = 0;
  // dqkv [T, 3H] (overwritten) from dctx [T, H]. Reads what the forward call that wrote `stats`
  // kept beside them (its 16-bit output and sequence lengths; Error(invalid_argument) when no
  // forward with this layout wrote `stats`).
  virtual void backward(float* dqkv, const float* dctx, const float* qkv, const float* stats,
                        const AttentionLayout& layout, int heads, int head_dim,
                        const DropoutSite& site) = 0;
};

// The cuDNN implementation with 16-bit I/O of `io` kind. Throws Error(unsupported) naming the
// config key train.fused_attention when this build has no cudnn-frontend.
std::unique_ptr<FusedAttention> make_fused_attention(DeviceMemory& memory, cudaStream_t stream,
                                                     kernels::LowPrecision io);

}  // namespace bert
