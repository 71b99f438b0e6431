// Host-callable launchers of the CUDA kernels in kernels/ (one group per .cu file). Each
// enqueues its kernels on `stream`, checks the launch, and returns without synchronising.
// Pointers are device memory unless named host_*; shapes follow ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/op_checks.h"
#include "backend/ops.h"

namespace bert::kernels {

// ---- activation.cu: out = act(pre); dpre = dout ⊙ act'(pre) (n elements) ----
void activation_fwd(float* out, const float* pre, int64_t n, Activation act, cudaStream_t stream);
void activation_bwd(float* dpre, const float* dout, const float* pre, int64_t n, Activation act,
                    cudaStream_t stream);

// ---- dropout.cu: element i uses Philox index index_base + i; keep_scale = 1/(1-p) ----
// out = dropout(in) + residual (residual may be null); out may alias in.
void dropout_residual_fwd(float* out, const float* in, const float* residual, int64_t n,
                          const DropoutSite& site, float keep_scale, int64_t index_base,
                          cudaStream_t stream);
// din = dout ⊙ mask · keep_scale; din may alias dout.
void dropout_bwd(float* din, const float* dout, int64_t n, const DropoutSite& site,
                 float keep_scale, cudaStream_t stream);

// ---- embedding.cu: out[t] = word[word_ids[t]] + pos[pos_ids[t]] + type[type_ids[t]] ----
void embedding_fwd(float* out, const int32_t* word_ids, const int32_t* pos_ids,
                   const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                   const float* type_emb, int64_t T, int H, cudaStream_t stream);

// ---- rows.cu: gathers and deterministic scatter-adds of rows ----
void gather_rows(float* out, const float* in, const int32_t* rows, int64_t n, int H,
                 cudaStream_t stream);
// Bytes of scratch scatter_add_rows needs for n rows.
size_t scatter_add_scratch_bytes(int64_t n);
// dst[rows[i]] += src[i]: rows are stably sorted, and each distinct row is summed by one block
// in increasing i, starting from dst's value (the CPU's order, so results are bitwise equal).
void scatter_add_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int H,
                      void* scratch, size_t scratch_bytes, cudaStream_t stream);

// ---- layernorm.cu ----
void layernorm_fwd(float* out, float* mean, float* rstd, const float* in, const float* gamma,
                   const float* beta, int64_t M, int N, float eps, cudaStream_t stream);
// din (overwritten) only.
void layernorm_bwd_input(float* din, const float* dout, const float* in, const float* mean,
                         const float* rstd, const float* gamma, int64_t M, int N,
                         cudaStream_t stream);
// Number of row chunks (and [chunks, 2N] double partials) layernorm_bwd_params uses.
int layernorm_param_chunks(int64_t M);
// dgamma += Σ_rows dout ⊙ x̂, dbeta += Σ_rows dout, in a fixed order.
void layernorm_bwd_params(float* dgamma, float* dbeta, const float* dout, const float* in,
                          const float* mean, const float* rstd, int64_t M, int N,
                          double* partials, cudaStream_t stream);

// ---- reduce.cu ----
// Row chunks of column_sum_add (its partials are [chunks, N] doubles).
int column_sum_chunks(int64_t M);
// out[N] += Σ_rows a[M, N] in a fixed order (double accumulation).
void column_sum_add(float* out, const float* a, int64_t M, int N, double* partials,
                    cudaStream_t stream);

// Flattened chunks of a list of parameter segments for the multi-tensor kernels.
// chunk_start [segs + 1]: first chunk of each segment; offset/size per segment.
struct SegmentTable {
  const int64_t* chunk_start = nullptr;
  const int64_t* offset = nullptr;
  const int64_t* size = nullptr;
  const float* value = nullptr;  // per-segment weight decay or update scale
  int segments = 0;
  int64_t chunks = 0;
};
constexpr int64_t kSegmentChunk = 16384;  // elements per chunk of a segment

// A SegmentTable's index in one array of 3·S + 1 words: chunk_start [S + 1] | offset [S] |
// size [S] (filled on the host, then copied to the device), for op `op`'s segments (checked).
// Returns the number of chunks.
inline int64_t fill_segment_words(const char* op, const std::vector<ParamSegment>& segs,
                                  std::vector<int64_t>& words) {
  check_segments(op, segs);
  const size_t S = segs.size();
  words.assign(3 * S + 1, 0);
  int64_t* chunk_start = words.data();
  for (size_t s = 0; s < S; ++s) {
    words[S + 1 + s] = segs[s].offset;
    words[2 * S + 1 + s] = segs[s].size;
    chunk_start[s + 1] = chunk_start[s] + (segs[s].size + kSegmentChunk - 1) / kSegmentChunk;
  }
  return chunk_start[S];
}

// The table over a copy of fill_segment_words' array (`words`) and per-segment `values`.
inline SegmentTable segment_table_at(const int64_t* words, const float* values, int segments,
                                     int64_t chunks) {
  SegmentTable table;
  table.chunk_start = words;
  table.offset = words + segments + 1;
  table.size = words + 2 * segments + 1;
  table.value = values;
  table.segments = segments;
  table.chunks = chunks;
  return table;
}

// out[s] = Σ x^2 over segment s: per-chunk partials [chunks] in double, then each segment's
// partials summed in chunk order (deterministic; no atomics).
void segment_sumsq(double* out, const float* x, const SegmentTable& table, double* partials,
                   cudaStream_t stream);

// ---- optimizer.cu ----
void adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                    const SegmentTable& table, const AdamStepArgs& args, cudaStream_t stream);
void apply_update(float* param, const float* update, const SegmentTable& table,
                  cudaStream_t stream);
void scale(float* x, float a, int64_t n, cudaStream_t stream);

// ---- attention_softmax.cu: one sequence's [rows = heads·L, L] block at probs_offset ----
// In place: scores (raw Q·K^T) -> P = softmax(scores·scale + key_bias[k]). When dropped is not
// null it receives dropout(P) with Philox index probs_offset + (element index in the block).
void attention_softmax_fwd(float* probs, float* dropped, const float* key_bias, int64_t rows,
                           int L, float scale, int64_t probs_offset, const DropoutSite& site,
                           float keep_scale, cudaStream_t stream);
// In place: dgrad holds d(dropout(P)); becomes d(scores) = P ⊙ (dP - Σ_k P dP) · scale.
void attention_softmax_bwd(float* dgrad, const float* probs, int64_t rows, int L, float scale,
                           int64_t probs_offset, const DropoutSite& site, float keep_scale,
                           cudaStream_t stream);

// ---- softmax_xent.cu ----
// label_status [4] (device): [0] += the number of labels >= V; when [0] was 0 before, [1..3]
// receive the first such row, its label and V. Those rows' outputs are undefined.
void softmax_xent(float* dlogits, float* losses, int32_t* correct, const float* logits,
                  const int32_t* labels, int64_t M, int V, int ld, float grad_scale,
                  int32_t* label_status, cudaStream_t stream);

// ---- cast.cu: fp32 <-> 16-bit (GEMM inputs, fused attention I/O, gradient wire format) ----
enum class LowPrecision { bf16, fp16 };
// dst (bf16/fp16 bits) = round-to-nearest-even(src[i] * scale), n elements
void cast_to_lowp(void* dst, const float* src, int64_t n, float scale, LowPrecision kind, cudaStream_t stream);
// dst[i] = float(src[i]) * scale
void cast_from_lowp(float* dst, const void* src, int64_t n, float scale, LowPrecision kind, cudaStream_t stream);

// ---- attention_lengths.cu: per-sequence key counts for the fused (cuDNN) attention ----
// seq_len[b] = number of leading keys of sequence b (tokens seq_start[b] .. seq_start[b+1]-1)
// whose key_bias is 0 (not masked); seq_start [num_seqs + 1] is device memory.
void attention_seq_lengths(int32_t* seq_len, const int32_t* seq_start, const float* key_bias,
                           int num_seqs, cudaStream_t stream);

}  // namespace bert::kernels
