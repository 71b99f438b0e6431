// CpuOps: the fp32 reference implementation of the Ops interface (oneDNN GEMMs + OpenMP).
// Every other backend is tested against it, so each op is written for exactness first and is
// deterministic for a fixed thread count (most ops for any thread count). Scratch buffers live
// in the object and only grow, so steady-state calls allocate nothing themselves. One CpuOps
// serves one host thread at a time (alloc/release are also safe from other threads).
// With bf16 GEMM inputs (train.precision "bf16", on CPUs that multiply bf16 natively) the dense
// layers multiply bf16 copies of their inputs and weights with fp32 accumulation and output; the
// weights' copy is refreshed after weights_changed(), everything else stays fp32.
// For forward-only products on few rows (inference, evaluation) the weight matrices are also
// packed (cpu_packed_gemm.h; with bf16 GEMM inputs reordered for oneDNN's matmul,
// cpu_packed_gemm_bf16.h), each on its first such product after weights_changed().
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_packed_gemm.h"
#include "backend/cpu/cpu_packed_gemm_bf16.h"
#include "backend/ops.h"

namespace bert {

// Loops over fewer elements than this run on one thread (starting an OpenMP team costs more
// than the work); larger elementwise loops are cut into chunks of this many elements. Only
// speed depends on it: every op's result is the same for any thread count it allows.
constexpr int64_t kParallelElements = 16384;

class CpuOps final : public Ops {
 public:
  // Throws Code::unsupported for bf16 GEMM inputs on a CPU without native bf16.
  CpuOps(int threads, bool bf16_gemm_inputs);
  ~CpuOps() override;
  CpuOps(const CpuOps&) = delete;
  CpuOps& operator=(const CpuOps&) = delete;

  std::string name() const override { return "cpu"; }
  int threads() const { return threads_; }

  size_t peak_bytes() const override;
  DType activation_type() const override { return DType::f32; }
  void set_weights(const float* params, int64_t n) override;
  void weights_changed() override;


 private:
  // Memory and scale (cpu_memory.cpp, cpu_optimizer.cpp; called by Ops' public methods).
  BERT_PLAIN_OVERRIDES
  // Ops' implementations (cpu_<family>.cpp; their arguments were checked by the Ops method that
  // calls them). The CPU stores activations in fp32 (activation_type(); ops.cpp checks what it is
  // given), so each reads its activation views as fp32 storage.
  BERT_NUMERIC_OPS(BERT_OP_OVERRIDE)

  // Adds delta to the bytes held (and to the peak) for memory not from alloc (packed weights).
  void count_held_bytes(int64_t delta);
  // Per-thread attention scratch of `floats_per_thread` floats each; grows, never shrinks.
  float* attention_scratch(size_t floats_per_thread);
  // With bf16 GEMM inputs: per-thread bf16 scratch of `per_thread` values each, and x [rows, cols]
  // (dense) converted into `copy`; null for fp32 inputs.
  uint16_t* attention_scratch16(size_t per_thread);
  const uint16_t* attention_bf16_copy(const float* x, int64_t rows, int64_t cols, std::vector<uint16_t>& copy);
  // C[M,N] = op(A)·op(B) + beta·C for a dense layer: in fp32, or from bf16 copies of A and B;
  // the second form takes A already in bf16 (bf16 GEMM inputs only).
  void linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<float> A, GemmOperand<float> B, float beta,
                   float* C, int64_t ldc);
  void linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<uint16_t> A, GemmOperand<float> B, float beta,
                   float* C, int64_t ldc);
  // Whether the elems floats from p lie in the parameter buffer (set_weights).
  bool is_weight(const float* p, int64_t elems) const;
  // The packed copy of the weight matrix W [N, K] for a forward product on M rows, made now if
  // there is none; null where the product stays with oneDNN (not a weight, bf16 inputs, more
  // than kPackedGemmMaxRows rows, no AVX-512).
  const PackedWeight* packed_weight(const float* W, int64_t M, int64_t N, int64_t K);
  // The same for bf16 GEMM inputs, on any number of rows: W's reordered bf16 copy, made now if
  // there is none; null for fp32 inputs or W not a weight.
  PackedWeightBf16* packed_weight_bf16(const float* W, int64_t N, int64_t K);
  // X (rows x cols as stored) in bf16: the weights' copy when X is a weight matrix, else
  // converted into `scratch`.
  GemmOperand<uint16_t> bf16_operand(GemmOperand<float> X, int64_t rows, int64_t cols,
                                     std::vector<uint16_t>& scratch);
  // Fills seq_probs_offset_ with AttentionLayout::probs_offset for every sequence (+ total).
  void compute_probs_offsets(const AttentionLayout& layout, int heads);
  // The fixed element chunks of the sums of squares: plan_sumsq_chunks fills sumsq_chunk_start_,
  // sizes sumsq_partials_ for `sets` sets and returns the number of chunks; sumsq_chunk_at names
  // chunk c's segment and range; finish_sumsq sums each set's partials per segment in chunk order.
  struct SumsqChunk {
    size_t segment;
    int64_t begin, end;
  };
  int64_t plan_sumsq_chunks(const std::vector<ParamSegment>& segs, int sets);
  SumsqChunk sumsq_chunk_at(const std::vector<ParamSegment>& segs, int64_t c) const;
  void finish_sumsq(double* host_out, size_t segments, int sets) const;

  int threads_;
  bool bf16_gemm_inputs_;

  const float* weights_ = nullptr;      // the flat parameter buffer (set_weights)
  int64_t weight_count_ = 0;
  std::vector<uint16_t> weights_bf16_;  // its bf16 copy (bf16 GEMM inputs only)
  bool weights_bf16_fresh_ = false;
  bool packed_gemm_;  // fp32 inputs on an AVX-512 CPU
  std::unordered_map<const float*, std::unique_ptr<PackedWeight>> packed_;  // by W; counted in held bytes
  std::vector<float> packed_scratch_;
  std::unordered_map<const float*, std::unique_ptr<PackedWeightBf16>> packed_bf16_;  // likewise
  std::vector<uint16_t> bf16_a_, bf16_b_, bf16_c_;  // converted operands of one GEMM or of a backward pair

  mutable std::mutex memory_mutex_;
  std::unordered_map<void*, size_t> live_;  // allocation -> requested bytes
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;

  std::vector<float> attention_scratch_;     // [threads_, per-thread floats]
  std::vector<uint16_t> attention_scratch16_;            // [threads_, per-thread values] (bf16 inputs)
  std::vector<uint16_t> attention_a16_, attention_b16_;  // qkv's and dctx's bf16 copies (bf16 inputs)
  std::vector<int64_t> seq_probs_offset_;    // [num_seqs + 1]
  std::vector<int64_t> sumsq_chunk_start_;   // [segments + 1], first global chunk per segment
  std::vector<double> sumsq_partials_;       // [sets, total chunks]
  std::vector<double> layernorm_partials_;   // residual_layernorm_bwd: [row chunks, 2N]
};

}  // namespace bert

