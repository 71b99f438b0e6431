// FusedAttention: Ops::attention_fwd/bwd through cuDNN's fused scaled-dot-product attention
// (cudnn-frontend graph API, flash-attention style: no [L, L] probabilities are materialised),
// for padded and variable-length (packed) batches on every GPU cuDNN runs it on. Inputs and
// outputs at the Ops boundary are fp32 (cast to 16 bits around cuDNN) or 16-bit activations of
// cuDNN's I/O type (read and written as they are); the softmax statistics (heads · total_tokens
// floats) go into the caller's probs buffer, except where a variable-length batch runs as a
// padded copy (then they are kept with the forward's output).
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
  // Ops::attention_fwd semantics for every query row that is not padding (padded query rows of
  // ctx are 0); stats [heads · total_tokens] replace the reference's probabilities (a padded
  // copy's stats are kept beside its output instead, and `stats` only names them). Dropout
  // masks come from cuDNN's Philox stream keyed by the site, not the engine's.
  virtual void forward(Act ctx, float* stats, ConstAct qkv, const float* key_bias,
                       const AttentionLayout& layout, int heads, int head_dim,
                       const DropoutSite& site) = 0;
  // dqkv [T, 3H] (overwritten) from dctx [T, H] and the forward's output ctx (unchanged since).
  // Reads what the forward call that wrote `stats` kept beside them (sequence lengths; its 16-bit
  // output where ctx is not it: fp32 or padded; padded stats; Error(invalid_argument) when no
  // forward with this layout wrote `stats`).
  virtual void backward(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, const float* stats,
                        const AttentionLayout& layout, int heads, int head_dim,
                        const DropoutSite& site) = 0;
};

// CudaOptions::fused_attention_pad_varlen and fused_attention_deterministic_only.
struct FusedAttentionOptions {
  bool pad_varlen = false;
  bool deterministic_only = false;
};

// The cuDNN implementation with 16-bit I/O of `io` kind. Variable-length batches run through
// cuDNN's ragged graphs on Hopper-class GPUs and through padded copies elsewhere (cuDNN has no
// ragged backward there), or everywhere with pad_varlen (tests use it to check that path on
// Hopper). The backward is cuDNN's deterministic one, or where it offers none the
// atomics-based one (refused with deterministic_only). Throws Error(unsupported) naming the
// config key train.fused_attention when this build has no cudnn-frontend.
std::unique_ptr<FusedAttention> make_fused_attention(DeviceMemory& memory, cudaStream_t stream,
                                                     kernels::LowPrecision io, const FusedAttentionOptions& options);

}  // namespace bert
