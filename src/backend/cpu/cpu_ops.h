// CpuOps: the fp32 reference implementation of the Ops interface (oneDNN GEMMs + OpenMP).
// Every other backend is tested against it, so each op is written for exactness first and is
// deterministic for a fixed thread count (most ops for any thread count). Scratch buffers live
// in the object and only grow, so steady-state calls allocate nothing themselves. One CpuOps
// serves one host thread at a time (alloc/release are also safe from other threads).
// With bf16 GEMM inputs (train.precision "bf16", on CPUs that multiply bf16 natively) the dense
// layers multiply bf16 copies of their inputs and weights with fp32 accumulation and output; the
// weights' copy is refreshed after weights_changed(), everything else stays fp32.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
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
  void weights_changed() override { weights_bf16_fresh_ = false; }


 private:
  // Memory (called by Ops' public methods).
  void* alloc_impl(size_t bytes) override;
  void release_impl(void* ptr) override;
  void upload_impl(void* dst, const void* host_src, size_t bytes) override;
  void download_impl(void* host_dst, const void* src, size_t bytes) override;
  void copy_impl(void* dst, const void* src, size_t bytes) override;
  void fill_zero_impl(void* dst, size_t bytes) override;
  void synchronize_impl() override {}
  // Ops' implementations (their arguments were checked by the Ops method that calls them).
  // The CPU stores activations in fp32 (activation_type(); ops.cpp checks what it is given):
  // each override unwraps the activation views and runs the fp32 implementation below.
  void embedding_fwd_impl(Act out, const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                          const float* word_emb, const float* pos_emb, const float* type_emb, int64_t T,
                          int H) override {
    embedding_fwd_f32(out.f32(), word_ids, pos_ids, type_ids, word_emb, pos_emb, type_emb, T, H);
  }
  void embedding_bwd_impl(float* dword, float* dpos, float* dtype, ConstAct dout, const int32_t* word_ids,
                          const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H) override {
    embedding_bwd_f32(dword, dpos, dtype, dout.f32(), word_ids, pos_ids, type_ids, T, H);
  }
  void linear_fwd_impl(Act out, Act pre_act, ConstAct in, const float* W, const float* b, int64_t M, int K, int N,
                       Activation act) override {
    linear_fwd_f32(out.f32(), pre_act.f32(), in.f32(), W, b, M, K, N, act);
  }
  void linear_bwd_impl(Act din, float* dW, float* db, ConstAct dout, ConstAct in, const float* W, ConstAct pre_act,
                       Act dpre_scratch, int64_t M, int K, int N, Activation act, bool accumulate_din) override {
    linear_bwd_f32(din.f32(), dW, db, dout.f32(), in.f32(), W, pre_act.f32(), dpre_scratch.f32(), M, K, N, act,
                   accumulate_din);
  }
  void activation_fwd_impl(Act out, ConstAct pre, int64_t n, Activation act) override {
    activation_fwd_f32(out.f32(), pre.f32(), n, act);
  }
  void layernorm_fwd_impl(Act out, float* mean, float* rstd, ConstAct in, const float* gamma, const float* beta,
                          int64_t M, int N, float eps) override {
    layernorm_fwd_f32(out.f32(), mean, rstd, in.f32(), gamma, beta, M, N, eps);
  }
  void layernorm_bwd_impl(Act din, float* dgamma, float* dbeta, ConstAct dout, ConstAct in, const float* mean,
                          const float* rstd, const float* gamma, int64_t M, int N) override {
    layernorm_bwd_f32(din.f32(), dgamma, dbeta, dout.f32(), in.f32(), mean, rstd, gamma, M, N);
  }
  void dropout_residual_fwd_impl(Act out, ConstAct in, ConstAct residual, int64_t n, const DropoutSite& site) override {
    dropout_residual_fwd_f32(out.f32(), in.f32(), residual.f32(), n, site);
  }
  void dropout_bwd_impl(Act din, ConstAct dout, int64_t n, const DropoutSite& site) override {
    dropout_bwd_f32(din.f32(), dout.f32(), n, site);
  }
  void residual_layernorm_fwd_impl(Act out, Act res, float* mean, float* rstd, ConstAct in, ConstAct residual,
                                   const float* gamma, const float* beta, int64_t M, int N, float eps,
                                   const DropoutSite& site) override {
    residual_layernorm_fwd_f32(out.f32(), res.f32(), mean, rstd, in.f32(), residual.f32(), gamma, beta, M, N, eps,
                               site);
  }
  void residual_layernorm_bwd_impl(Act d_in, Act d_residual, float* dgamma, float* dbeta, ConstAct dout, ConstAct res,
                                   const float* mean, const float* rstd, const float* gamma, int64_t M, int N,
                                   const DropoutSite& site) override {
    residual_layernorm_bwd_f32(d_in.f32(), d_residual.f32(), dgamma, dbeta, dout.f32(), res.f32(), mean, rstd, gamma, M,
                               N, site);
  }
  void attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* key_bias, const AttentionLayout& layout,
                          int heads, int head_dim, const DropoutSite& site) override {
    attention_fwd_f32(ctx.f32(), probs.f32(), qkv.f32(), key_bias, layout, heads, head_dim, site);
  }
  void attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct /*ctx*/, ConstAct qkv, ConstAct probs, const AttentionLayout& layout,
                          int heads, int head_dim, const DropoutSite& site) override {
    attention_bwd_f32(dqkv.f32(), dctx.f32(), qkv.f32(), probs.f32(), layout, heads, head_dim, site);
  }
  void gather_rows_impl(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) override {
    gather_rows_f32(out.f32(), in.f32(), rows, n, H);
  }
  void scatter_add_rows_impl(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H) override {
    scatter_add_rows_f32(dst.f32(), src.f32(), rows, n, H);
  }
  void softmax_xent_impl(Act dlogits, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels,
                         int64_t M, int V, int ld, ScaleArg grad_scale) override {
    softmax_xent_f32(dlogits.f32(), losses, correct, logits.f32(), labels, M, V, ld, grad_scale.value);
  }

  // The fp32 implementations (cpu_<family>.cpp).
  void embedding_fwd_f32(float* out, const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                         const float* word_emb, const float* pos_emb, const float* type_emb, int64_t T, int H);
  void embedding_bwd_f32(float* dword, float* dpos, float* dtype, const float* dout, const int32_t* word_ids,
                         const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H);
  void linear_fwd_f32(float* out, float* pre_act, const float* in, const float* W, const float* b, int64_t M, int K,
                      int N, Activation act);
  void linear_bwd_f32(float* din, float* dW, float* db, const float* dout, const float* in, const float* W,
                      const float* pre_act, float* dpre_scratch, int64_t M, int K, int N, Activation act,
                      bool accumulate_din);
  void activation_fwd_f32(float* out, const float* pre, int64_t n, Activation act);
  void layernorm_fwd_f32(float* out, float* mean, float* rstd, const float* in, const float* gamma, const float* beta,
                         int64_t M, int N, float eps);
  void layernorm_bwd_f32(float* din, float* dgamma, float* dbeta, const float* dout, const float* in, const float* mean,
                         const float* rstd, const float* gamma, int64_t M, int N);
  void dropout_residual_fwd_f32(float* out, const float* in, const float* residual, int64_t n, const DropoutSite& site);
  void dropout_bwd_f32(float* din, const float* dout, int64_t n, const DropoutSite& site);
  void residual_layernorm_fwd_f32(float* out, float* res, float* mean, float* rstd, const float* in,
                                  const float* residual, const float* gamma, const float* beta, int64_t M, int N,
                                  float eps, const DropoutSite& site);
  void residual_layernorm_bwd_f32(float* d_in, float* d_residual, float* dgamma, float* dbeta, const float* dout,
                                  const float* res, const float* mean, const float* rstd, const float* gamma, int64_t M,
                                  int N, const DropoutSite& site);
  void attention_fwd_f32(float* ctx, float* probs, const float* qkv, const float* key_bias,
                         const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site);
  void attention_bwd_f32(float* dqkv, const float* dctx, const float* qkv, const float* probs,
                         const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site);
  void gather_rows_f32(float* out, const float* in, const int32_t* rows, int64_t n, int H);
  void scatter_add_rows_f32(float* dst, const float* src, const int32_t* rows, int64_t n, int H);
  void softmax_xent_f32(float* dlogits, float* losses, int32_t* correct, const float* logits, const int32_t* labels,
                        int64_t M, int V, int ld, float grad_scale);

  void segment_sumsq_impl(double* host_out, const float* x,
                          const std::vector<ParamSegment>& segs) override;
  void adam_direction_impl(float* update, float* m, float* v, const float* grad, const float* param,
                           const std::vector<ParamSegment>& segs, const AdamStepArgs& args,
                           double* host_sumsq) override;
  void apply_update_impl(float* param, const float* update, const std::vector<ParamSegment>& segs,
                         const std::vector<float>& host_scale) override;
  void optimizer_step_impl(float* param, float* m, float* v, float* update, const float* grad,
                           const std::vector<ParamSegment>& segs, TrustRatio trust,
                           OptimizerStepState* state) override;
  void scale_impl(float* x, float a, int64_t n) override;

  // Per-thread attention scratch of `floats_per_thread` floats each; grows, never shrinks.
  float* attention_scratch(size_t floats_per_thread);
  // C[M,N] = op(A)·op(B) + beta·C for a dense layer: in fp32, or from bf16 copies of A and B;
  // the second form takes A already in bf16 (bf16 GEMM inputs only).
  void linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<float> A, GemmOperand<float> B, float beta,
                   float* C, int64_t ldc);
  void linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<uint16_t> A, GemmOperand<float> B, float beta,
                   float* C, int64_t ldc);
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
  std::vector<uint16_t> bf16_a_, bf16_b_;  // converted activations of one GEMM

  mutable std::mutex memory_mutex_;
  std::unordered_map<void*, size_t> live_;  // allocation -> requested bytes
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;

  std::vector<float> attention_scratch_;     // [threads_, per-thread floats]
  std::vector<int64_t> seq_probs_offset_;    // [num_seqs + 1]
  std::vector<int64_t> sumsq_chunk_start_;   // [segments + 1], first global chunk per segment
  std::vector<double> sumsq_partials_;       // [sets, total chunks]
  std::vector<double> layernorm_partials_;   // residual_layernorm_bwd: [row chunks, 2N]
};

}  // namespace bert
