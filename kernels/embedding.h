// Launchers of kernels/embedding.cu: the embedding sum (word + position + token type). Out[t] =
// word[word_ids[t]] + pos[pos_ids[t]] + type[type_ids[t]].
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"

namespace bert::kernels {

void embedding_fwd(Act out, const int32_t* word_ids, const int32_t* pos_ids,
                   const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                   const float* type_emb, int64_t T, int H, cudaStream_t stream);

}  // namespace bert::kernels
