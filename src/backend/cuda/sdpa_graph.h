// cuDNN's scaled-dot-product-attention graphs as the fused attention asks for them: the shape of a
// call, the tensor uids of its variant packs, and the graph described (tensors, the forward with
// its softmax stats or the backward) but not yet validated or built, which needs no device:
// CudnnAttention validates, builds and runs it, and a CPU test validates every graph the engine
// requests against cuDNN's rules for a given SM.
#pragma once

#include <cudnn_frontend.h>

#include <cstdint>
#include <memory>

#include "kernels/cast.h"

namespace bert {

// Tensor uids of the variant packs.
enum SdpaUid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kSeqLenQ, kSeqLenKV, kOffQ, kOffK, kOffV, kOffO, kOffStats, kSeed, kOffset,
};

// The shape of one call, as the graphs see it.
struct SdpaShape {
  bool ragged = false;  // variable lengths through ragged (THD) graphs
  bool padded = false;  // variable lengths through the padded graphs, on a [B, S, 3H] copy
  int64_t B = 0;  // sequences
  int64_t S = 0;  // sequence length (the bound of all lengths when they vary)
  int64_t T = 0;  // tokens
  int64_t h = 0, D = 0;
  // Rows of the 16-bit Q/K/V, O and their gradients: the padded copy's or the tokens.
  int64_t rows() const { return padded ? B * S : T; }
};

// The graph of one direction: Q/K/V read as strided views of qkv [T, 3H] ("T3HD"), O [T, H],
// softmax stats fp32, a padding mask from per-sequence key counts, dropout p (cuDNN's Philox:
// seed and offset tensors) when p > 0, the deterministic backward algorithm when asked; I/O of
// `io`'s 16-bit type, fp32 compute. sm_version (e.g. 90) is the target GPU's, for validating
// without one; 0: the current device's, asked when the graph is validated. (The frontend copies
// the graph's settings into each node as it is added, so the target is set first.)
std::shared_ptr<cudnn_frontend::graph::Graph> describe_sdpa_graph(bool backward, const SdpaShape& s, float p,
                                                                   bool deterministic, kernels::LowPrecision io,
                                                                   int sm_version = 0);

}  // namespace bert
