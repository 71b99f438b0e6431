// CostModelOps: an Ops that records, per call, the kernels the CUDA backend (CudaOps) would
// launch for it — FLOPs, device bytes read and written at the backend's storage precision
// (activations in the type each call passes: fp32, or 16-bit with CudaOptions::activations_16bit;
// 16-bit GEMM operands in bf16/fp16 mode, fp32 ones cast first unless they are weights in the
// mirror), host transfers and host waits — and predicts a step's time on a named
// GPU kernel by kernel as max(FLOPs / peak, bytes / bandwidth) + a launch cost. Without an inner
// backend it does no arithmetic at all (memory is address space only; downloads read zeros), so
// BERT-large shapes run on any machine; with one it forwards every call (the emulator check).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/gemm_args.h"
#include "backend/ops.h"

namespace bert {

// The arithmetic unit a kernel's FLOPs run on; the fused attention's kernels run at the rate
// cuDNN is published to reach (DeviceModel::fused_attention_*_flops), not at the tensor peak.
enum class MathUnit { tensor16, tf32, fp32, fused_attention_fwd, fused_attention_bwd };

// One GPU's peak rates for the cost model.
struct DeviceModel {
  std::string name;
  double tensor16_flops = 0;  // dense bf16/fp16 tensor-core FLOP/s
  double tf32_flops = 0;      // dense TF32 tensor-core FLOP/s
  double fp32_flops = 0;      // fp32 without tensor cores
  double bandwidth = 0;       // device memory, bytes/s
  double host_link = 0;       // host <-> device, bytes/s
  double gpu_link = 0;        // per-GPU bandwidth of collectives between GPUs (NVLink), bytes/s
  // cuDNN's fused attention (bf16, head dim 64, no causal mask), FLOP/s reached forward and
  // backward; 0: not known for this device (the cost model then refuses the fused attention).
  double fused_attention_fwd_flops = 0, fused_attention_bwd_flops = 0;
  // Where measured at more than one sequence length (cuDNN reaches less on short sequences): the
  // rates at each measured length, by the kernel's attention length (KernelCost); between two
  // lengths the rate follows a power law, outside them it stays at the nearest one's.
  struct AttentionRates {
    double length, fwd_flops, bwd_flops;
  };
  std::vector<AttentionRates> fused_attention_by_length;  // by increasing length
  // A measured device: the share of its roofline time (max(FLOPs / peak, bytes / bandwidth)) each
  // kernel kind (KernelCost::kind) reached; a kind not listed reaches all of it.
  std::map<std::string, double> kind_efficiency;
  double launch_seconds = 4e-6;     // per kernel launch or copy outside a CUDA graph
  double host_wait_seconds = 10e-6;  // per host wait for the stream (never graphed)
};

// "h100" (SXM) or "a100" (80 GB SXM) at their datasheet rates, or "h200" as measured (BERT-large
// on a lent H200); Error(invalid_argument) naming the known ones otherwise.
DeviceModel device_model(const std::string& name);

// One kernel (or copy) as CudaOps would launch it.
struct KernelCost {
  std::string op;    // the Ops method that launched it
  std::string kind;  // what the kernel does: "gemm", "cast", "layernorm", ...
  double flops = 0;
  double read_bytes = 0, write_bytes = 0;  // device memory
  double host_bytes = 0;                   // over the host link (copies count here only)
  MathUnit unit = MathUnit::fp32;
  double attention_length = 0;  // the fused attention's kernels: Σ L² / Σ L over the sequences
  int launches = 1;        // launches (or copies) this entry stands for
  bool host_wait = false;  // the host waits for the stream after it
  bool graphed = false;    // replayed in a CUDA graph (Ops::record): no launch cost
  // A communicator's work (CostModelOps::add_collective_work): collective entries run on its
  // stream beside the kernels, each once the work queued before it is done, moving link_bytes
  // over DeviceModel::gpu_link besides their device bytes; a join makes the backend's stream
  // wait there for every collective entry before it.
  bool collective = false, join = false;
  double link_bytes = 0;
};

struct CostModelOptions {
  // The CUDA backend's GEMM precision.
  Precision precision = Precision::bf16;
  // Whether cuBLASLt's GELU_AUX_BIAS epilogue computes the tanh form on the target (CudaOps
  // probes this at construction; it holds for the emulator and for cuBLASLt on sm_80/sm_90).
  bool fuse_gelu_tanh = true;
  // Without an inner backend: activations stored in the 16-bit type of `precision`
  // (CudaOptions::activations_16bit); with one, its activation_type() decides.
  bool activations_16bit = false;
  // Attention through cuDNN's fused kernels as CudaOps runs them on Hopper (packed batches in its
  // ragged layout; needs 16-bit activations) instead of the reference GEMMs and softmax.
  bool fused_attention = false;
};

class CostModelOps final : public Ops {
 public:
  // inner: the backend to forward to (its results are the real ones), or null for none.
  explicit CostModelOps(const CostModelOptions& options, std::unique_ptr<Ops> inner = nullptr);
  ~CostModelOps() override;

  // Kernels recorded since construction or the last reset(), in launch order.
  const std::vector<KernelCost>& kernels() const { return kernels_; }
  void reset() { kernels_.clear(); }
  // Work a communicator queues between the kernels (KernelCost::collective or ::join), recorded
  // and replayed with them.
  void add_collective_work(const KernelCost& k);

  std::string name() const override;
  size_t peak_bytes() const override;
  bool holds_values() const override { return inner_ != nullptr; }
  void* native_stream() override { return inner_ ? inner_->native_stream() : nullptr; }
  int device() const override { return inner_ ? inner_->device() : -1; }
  DType activation_type() const override;
  int64_t attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const override;
  // Records body's kernels (with no inner backend; else null: the work runs directly) as
  // graphed; each replay appends them again.
  std::unique_ptr<RecordedWork> record(const std::function<void()>& body) override;
  void set_weights(const float* params, int64_t n) override;
  void weights_changed() override;
  void refresh_weights() override;


 private:
  // Memory and scale (called by Ops' public methods).
  BERT_PLAIN_OVERRIDES
  // Ops' implementations (their arguments were checked by the Ops method that calls them).
  BERT_NUMERIC_OPS(BERT_OP_OVERRIDE)

  bool low_precision() const;
  MathUnit gemm_unit() const;
  // Records a kernel of `op` (launches = 1 unless given).
  KernelCost& add(const char* op, const char* kind, double flops, double read, double write);
  // The GEMM (as LtGemm::run gets it) and, in bf16/fp16 mode, the casts of its operands.
  void gemm(const char* op, const char* kind, const GemmArgs& g);
  // The 16-bit operand: itself when stored in 16 bits, the weight mirror (re-cast whole when
  // stale), a staged copy, or a cast of its span.
  void lowp_operand(const char* op, ConstAct x, int64_t span);
  // LtGemm::stage: one cast of fp32 [data, data + n) that later GEMM operands inside it read from.
  void stage(const char* op, ConstAct data, int64_t n);
  // CudaOps' attention scratch buffer `which` (0: dropped P, 1: dS) of n elements of `type`: an
  // address range reserved for it, never touched (GEMM operands inside it find it staged).
  Act scratch(int which, int64_t n, DType type);
  // CudaOps::softmax_sequences: a packed layout's sequence table, uploaded when it changes.
  void softmax_table(const char* op, const AttentionLayout& layout, int heads);
  // CudnnAttention::forward/backward on the ragged (or uniform padded) layout with 16-bit
  // activations: table upload, memsets, cuDNN's kernels and the output copy; `saved` is the
  // forward's key (its probs buffer) for the O it keeps for the backward.
  void fused_attention_table(const char* op, const AttentionLayout& layout, bool dropout);
  void fused_attention_fwd(const void* saved, const AttentionLayout& layout, int heads, int head_dim, bool dropout);
  void fused_attention_bwd(const AttentionLayout& layout, int heads, int head_dim, bool dropout);
  // n elements of `type`, `inputs` tensors read and `outputs` written.
  void elementwise(const char* op, const char* kind, int64_t n, int inputs, int outputs, double flops_per_elem,
                   DType type);
  void column_sum(const char* op, int64_t M, int N, DType type);
  // The multi-tensor kernels' segment table upload (two host-to-device copies).
  void segment_table(const char* op, const std::vector<ParamSegment>& segs);
  // The kernels of CudaOps::segment_sumsq, and of adam_direction (with_sums: LAMB's sums of
  // squares too), as `op`; no table upload or host copy.
  void sumsq_kernels(const char* op, const std::vector<ParamSegment>& segs);
  void direction_kernels(const char* op, const std::vector<ParamSegment>& segs, bool with_sums);
  // The kernels of CudaOps::scatter_add_rows (iota, CUB radix sort, segmented add), as `op`;
  // rows of src added into rows of dst.
  void scatter_kernels(const char* op, const int32_t* rows, int64_t n, int H, DType src, DType dst);
  // Distinct values of an int32 array the host uploaded (n when its contents are not known).
  int64_t distinct_rows(const int32_t* rows, int64_t n) const;

  CostModelOptions options_;
  std::unique_ptr<Ops> inner_;
  std::vector<KernelCost> kernels_;
  const float* weights_ = nullptr;  // the registered parameter range (set_weights)
  int64_t weight_elems_ = 0;
  bool weights_stale_ = true;
  std::vector<std::pair<const float*, int64_t>> staged_;  // LtGemm's staged ranges, as in attention
  std::map<void*, size_t> reserved_;  // without an inner backend: address-space reservations
  std::pair<void*, size_t> scratch_[2] = {};  // scratch(): address-space reservations
  size_t live_bytes_ = 0, peak_bytes_ = 0;
  std::map<const char*, std::vector<int32_t>> uploaded_ints_;  // small uploads, by destination
  std::vector<int64_t> softmax_table_;  // the last packed layout's sequence table (softmax_table)
  std::map<const void*, std::pair<void*, size_t>> fused_saved_;  // per probs buffer: the kept O
};

// A step's prediction from recorded kernels on a device.
struct CostRow {
  std::string name;  // op or kernel kind
  int64_t launches = 0;
  double flops = 0, bytes = 0, seconds = 0;
};
// The step runs as two streams: the kernels in order on the backend's, collective entries on the
// communicator's, joined where the kernels say; rows add each entry's own time, so with
// collectives hidden behind kernels their shares sum to more than the step.
struct StepPrediction {
  std::vector<CostRow> by_op, by_kind;  // each sorted by predicted time, largest first
  double seconds = 0;                   // the whole step
  double collective_seconds = 0;        // the communicator's stream busy
  double exposed_collective_seconds = 0;  // of the step, the time the kernels wait for it
  double gemm_flops = 0;                // FLOPs of the GEMM kernels (model FLOPs)
  int64_t launches = 0;
};
// A kernel of a CUDA graph (KernelCost::graphed) has no launch cost; host waits remain.
double kernel_seconds(const KernelCost& k, const DeviceModel& device);
StepPrediction predict_step(const std::vector<KernelCost>& kernels, const DeviceModel& device);

}  // namespace bert
