// CudaOps: the Ops interface on one CUDA device. All work is enqueued on one stream owned by the
// object (ordered like the CPU reference's calls); download, segment_sumsq and synchronize wait
// for it (and report a bad softmax_xent label the device counted since). GEMMs run through
// LtGemm in the precision chosen at construction (reading weights from its low-precision mirror
// in bf16/fp16 mode); activations are fp32 or, with activations_16bit, of that 16-bit type
// (activation_type()); attention runs the reference kernels or, when asked, cuDNN's fused SDPA;
// everything else runs the kernels in kernels/. Device memory goes through DeviceMemory for
// peak accounting.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/fused_attention.h"
#include "backend/ops.h"
#include "kernels/attention_softmax.h"
#include "kernels/reduce.h"

namespace bert {

class CudaOps final : public Ops {
 public:
  // options.fused_attention: attention through cuDNN (Error(unsupported) in builds without it);
  // options.activations_16bit: activations stored in the 16-bit type of a bf16/fp16 precision.
  CudaOps(int device, const CudaOptions& options);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  std::string name() const override;
  cudaStream_t stream() const { return stream_; }
  Precision precision() const { return gemm_->precision(); }
  bool fused_attention() const { return fused_ != nullptr; }
  // The low-precision weight copy (bf16/fp16 only; null otherwise).
  const WeightMirror* weight_mirror() const { return gemm_->weights(); }
  // What probing cuBLASLt's GELU_AUX_BIAS epilogue at construction found: the largest
  // deviation from each GELU form on known inputs (ran is false when cuBLASLt declined).
  struct GeluProbe {
    bool ran = false;
    double err_tanh = 0.0, err_erf = 0.0;
  };
  const GeluProbe& gelu_probe() const { return gelu_probe_; }
  // linear_fwd fuses gelu_tanh into the epilogue only when it matched the tanh form to fp32
  // rounding; the erf form (BERT's "gelu") always runs unfused.
  bool fuses_gelu_tanh() const { return gelu_probe_.ran && gelu_probe_.err_tanh < 2e-5; }

  size_t peak_bytes() const override;
  void* native_stream() override { return stream_; }
  int device() const override { return device_; }
  DType activation_type() const override { return activation_type_; }
  // With fused attention probs holds the softmax statistics.
  int64_t attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const override {
    return fused_ != nullptr ? fused_attention_saved_elems(max_seqs, max_len, heads)
                             : Ops::attention_saved_elems(max_seqs, max_len, heads);
  }

  // Stream capture into a CUDA graph (cuda_graph.cpp).
  std::unique_ptr<RecordedWork> record(const std::function<void()>& body) override;

  void set_weights(const float* params, int64_t n) override;
  void weights_changed() override;
  void refresh_weights() override;


 private:
  // Memory (called by Ops' public methods).
  void* alloc_impl(size_t bytes) override;
  void release_impl(void* ptr) override;
  void upload_impl(void* dst, const void* host_src, size_t bytes) override;
  void download_impl(void* host_dst, const void* src, size_t bytes) override;
  void copy_impl(void* dst, const void* src, size_t bytes) override;
  void fill_zero_impl(void* dst, size_t bytes) override;
  void synchronize_impl() override;
  // Ops' implementations (their arguments were checked by the Ops method that calls them).
  void embedding_fwd_impl(Act out, const int32_t* word_ids, const int32_t* pos_ids,
                          const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                          const float* type_emb, int64_t T, int H) override;
  void embedding_bwd_impl(float* dword, float* dpos, float* dtype, ConstAct dout,
                          const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                          int64_t T, int H) override;

  void linear_fwd_impl(Act out, Act pre_act, ConstAct in, const float* W, const float* b,
                       int64_t M, int K, int N, Activation act) override;
  void linear_bwd_impl(Act din, float* dW, float* db, ConstAct dout, ConstAct in,
                       const float* W, ConstAct pre_act, Act dpre_scratch, int64_t M, int K,
                       int N, Activation act, bool accumulate_din) override;
  void activation_fwd_impl(Act out, ConstAct pre, int64_t n, Activation act) override;

  void layernorm_fwd_impl(Act out, float* mean, float* rstd, ConstAct in, const float* gamma,
                          const float* beta, int64_t M, int N, float eps) override;
  void layernorm_bwd_impl(Act din, float* dgamma, float* dbeta, ConstAct dout, ConstAct in,
                          const float* mean, const float* rstd, const float* gamma, int64_t M,
                          int N) override;
  void dropout_residual_fwd_impl(Act out, ConstAct in, ConstAct residual, int64_t n,
                                 const DropoutSite& site) override;
  void dropout_bwd_impl(Act din, ConstAct dout, int64_t n, const DropoutSite& site) override;
  void residual_layernorm_fwd_impl(Act out, Act res, float* mean, float* rstd, ConstAct in,
                                   ConstAct residual, const float* gamma, const float* beta, int64_t M,
                                   int N, float eps, const DropoutSite& site) override;
  void residual_layernorm_bwd_impl(Act d_in, Act d_residual, float* dgamma, float* dbeta,
                                   ConstAct dout, ConstAct res, const float* mean, const float* rstd,
                                   const float* gamma, int64_t M, int N, const DropoutSite& site) override;

  void attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* key_bias,
                          const AttentionLayout& layout, int heads, int head_dim,
                          const DropoutSite& site) override;
  void attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                          const AttentionLayout& layout, int heads, int head_dim,
                          const DropoutSite& site) override;
  // `elems` activation-typed elements of a scratch buffer.
  Act scratch_act(ScratchBuffer& scratch, int64_t elems);
  // Where the attention softmax finds each sequence: padded batches by arithmetic; packed ones
  // through a device table of token starts and probs offsets, uploaded when the layout (or
  // heads) differs from the last one's, so once per batch rather than once per layer.
  kernels::SoftmaxSequences softmax_sequences(const AttentionLayout& layout, int heads);
  // The fused attention's fp32 softmax statistics in a probs buffer of any activation type.
  static float* fused_stats(ConstAct probs) { return static_cast<float*>(const_cast<void*>(probs.data)); }

  void gather_rows_impl(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) override;
  void scatter_add_rows_impl(Act dst, ConstAct src, const int32_t* rows, int64_t n,
                             int H) override;

  void softmax_xent_impl(Act dlogits, float* losses, int32_t* correct, ConstAct logits,
                         const int32_t* labels, int64_t M, int V, int ld, ScaleArg grad_scale) override;

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

  // Runs cuBLASLt's GELU_AUX_BIAS epilogue on known inputs and measures it against both forms.
  GeluProbe probe_gelu_epilogue();
  // Uploads the chunk table of op `op`'s `segs` (checked) with per-segment values (weight
  // decay or scale).
  kernels::SegmentTable upload_segments(const std::vector<ParamSegment>& segs,
                                        const std::vector<float>& values);
  // After the stream has drained: throws Error(invalid_argument) for the first out-of-range
  // label softmax_xent counted on the device since the last check (and clears the count).
  void check_labels();

  int device_;
  DType activation_type_ = DType::f32;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<LtGemm> gemm_;
  GeluProbe gelu_probe_;
  std::unique_ptr<FusedAttention> fused_;  // null: reference attention
  // Scratch, reused in stream order: reductions' partials, sort buffers, attention blocks,
  // and the segment tables of the multi-tensor kernels.
  std::unique_ptr<ScratchBuffer> partials_, sort_, attn_a_, attn_b_, table_, sums_, seqs_table_;
  std::vector<int64_t> host_table_;  // [3 · segs + 1] chunk_start | offset | size
  std::vector<float> host_values_;   // [segs]
  std::vector<int64_t> host_seqs_;   // the device seqs_table_'s contents (softmax_sequences)
  // optimizer_step's own segment table (chunk words | weight decay | the update scales the device
  // writes), uploaded when its segments change and never while recording: recorded steps read it.
  std::unique_ptr<ScratchBuffer> step_table_;
  std::vector<ParamSegment> step_segs_;
  // softmax_xent's label check, kept on the device: the kernel counts labels >= V into
  // label_status_ [4] (count, first row, its label, V), an async copy brings it to pinned host
  // memory, and check_labels() reads it whenever the host waits for the stream anyway.
  int32_t* label_status_ = nullptr;
  int32_t* host_label_status_ = nullptr;
};

}  // namespace bert
