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
  // Memory and scale (called by Ops' public methods).
  BERT_PLAIN_OVERRIDES
  // Ops' implementations (their arguments were checked by the Ops method that calls them).
  BERT_NUMERIC_OPS(BERT_OP_OVERRIDE)

  // `elems` activation-typed elements of a scratch buffer.
  Act scratch_act(ScratchBuffer& scratch, int64_t elems);
  // Where the attention softmax finds each sequence: padded batches by arithmetic; packed ones
  // through a device table of token starts and probs offsets, uploaded when the layout (or
  // heads) differs from the last one's, so once per batch rather than once per layer.
  kernels::SoftmaxSequences softmax_sequences(const AttentionLayout& layout, int heads);
  // The fused attention's fp32 softmax statistics in a probs buffer of any activation type.
  static float* fused_stats(ConstAct probs) { return static_cast<float*>(const_cast<void*>(probs.data)); }

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
