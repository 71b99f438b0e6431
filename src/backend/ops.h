// The Ops interface: every numeric operation BERT's forward and backward need.
// src/model/ writes the model once against this interface; backend/cpu implements it with
// oneDNN GEMMs and OpenMP loops (the fp32 reference) and backend/cuda with cuBLASLt/cuDNN/kernels. All float and
// int32 pointers are backend memory (host memory for the CPU backend, device memory for CUDA)
// unless a parameter says "host". Row-major throughout; shapes are given in [brackets].
// Activations, their gradients and the tensors saved for backward are Act / ConstAct views
// (core/act.h) stored in the backend's activation_type(); weights, gradients of parameters,
// optimizer state, LayerNorm statistics, key_bias and losses are fp32 (float*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/act.h"
#include "core/op_params.h"
#include "core/precision.h"

namespace bert {

// Sequences of a micro-batch laid back to back as token rows. Padded batches use
// seq_start = {0, S, 2S, ...}; unpadded (packed) batches use each sequence's own length.
// Attention never crosses a sequence boundary. Host memory; backends copy what they need.
struct AttentionLayout {
  std::vector<int32_t> seq_start;  // [num_seqs + 1], seq_start[0] == 0
  int num_seqs() const { return static_cast<int>(seq_start.size()) - 1; }
  int64_t total_tokens() const { return seq_start.empty() ? 0 : seq_start.back(); }
  int max_len() const;
  // The length every sequence has (a padded batch), or 0 when lengths differ or there are none.
  int64_t uniform_length() const;
  // Elements of the saved attention probabilities: heads * sum(len_b^2).
  int64_t probs_elems(int heads) const;
  // Offset of sequence b's probabilities: heads * sum_{b' < b} len_b'^2.
  int64_t probs_offset(int b, int heads) const;
};

// A contiguous parameter tensor inside the flat parameter buffer, as the optimizer sees it.
struct ParamSegment {
  int64_t offset = 0;
  int64_t size = 0;
  float weight_decay = 0.0f;
  bool operator==(const ParamSegment&) const = default;
};

// ---- the ops' arguments ----------------------------------------------------------------------
// Each numeric op takes one argument struct, its signature written once here (and listed in
// BERT_NUMERIC_OPS below): the public Ops method of the same name checks it (ops.cpp) and hands it
// to the backend's <op>_impl. Callers fill it in order ({out, in, ...}) or by name ({.out = ...}).

// ---- embeddings ----
// out[t] = word[word_ids[t]] + pos[pos_ids[t]] + type[type_ids[t]]; out [T,H].
struct EmbeddingFwdArgs {
  Act out;
  const int32_t* word_ids;
  const int32_t* pos_ids;
  const int32_t* type_ids;
  const float* word_emb;
  const float* pos_emb;
  const float* type_emb;
  int64_t T;
  int H;
};
// Accumulates (+=) dout rows into the three tables' gradients, deterministically.
struct EmbeddingBwdArgs {
  float* dword;
  float* dpos;
  float* dtype;
  ConstAct dout;
  const int32_t* word_ids;
  const int32_t* pos_ids;
  const int32_t* type_ids;
  int64_t T;
  int H;
};

// ---- dense layers ----
// out[M,N] = act(in[M,K] · W[N,K]^T + b[N]). b may be null. When act != none, pre_act[M,N]
// receives the pre-activation for the backward pass (else it may be null).
struct LinearFwdArgs {
  Act out;
  Act pre_act;
  ConstAct in;
  const float* W;
  const float* b;
  int64_t M;
  int K;
  int N;
  Activation act;
  // No backward pass follows (inference, evaluation): the CPU backend may then multiply by a
  // copy of W packed for few rows, kept until weights_changed() (cpu_packed_gemm.h).
  bool forward_only = false;
};
// dpre = dout ⊙ act'(pre_act) (dpre = dout when act == none; dpre_scratch [M,N] is used
// only when act != none). dW[N,K] += dpre^T·in, db[N] += Σ_rows dpre (db may be null),
// din[M,K] = dpre·W (or += when accumulate_din; din may be null).
struct LinearBwdArgs {
  Act din;
  float* dW;
  float* db;
  ConstAct dout;
  ConstAct in;
  const float* W;
  ConstAct pre_act;
  Act dpre_scratch;
  int64_t M;
  int K;
  int N;
  Activation act;
  bool accumulate_din;
};
// out = act(pre) over n elements (activation recomputation in backward).
struct ActivationFwdArgs {
  Act out;
  ConstAct pre;
  int64_t n;
  Activation act;
};

// ---- normalisation, dropout, residual ----
// out = (in - mean)·rstd·gamma + beta per row of in[M,N]; mean[M], rstd[M] saved.
struct LayernormFwdArgs {
  Act out;
  float* mean;
  float* rstd;
  ConstAct in;
  const float* gamma;
  const float* beta;
  int64_t M;
  int N;
  float eps;
};
// din[M,N] = (overwritten) gradient of the input; dgamma, dbeta [N] accumulate (+=).
struct LayernormBwdArgs {
  Act din;
  float* dgamma;
  float* dbeta;
  ConstAct dout;
  ConstAct in;
  const float* mean;
  const float* rstd;
  const float* gamma;
  int64_t M;
  int N;
};
// out = dropout(in) + residual (residual may be null); n elements.
struct DropoutResidualFwdArgs {
  Act out;
  ConstAct in;
  ConstAct residual;
  int64_t n;
  DropoutSite site;
};
// din = dout ⊙ mask / (1 - p) for the mask of `site`; din may alias dout.
struct DropoutBwdArgs {
  Act din;
  ConstAct dout;
  int64_t n;
  DropoutSite site;
};
// A post-LN residual block in one pass per row: res = dropout(in) + residual (the mask of
// `site`, the same Philox stream as dropout_residual_fwd), out = LayerNorm(res) as
// layernorm_fwd; in, residual, res, out [M,N], mean, rstd [M]. res, mean and rstd are what the
// backward reads: with them it reads two [M,N] tensors (dout, res) and writes two (d_in,
// d_residual); the mask is drawn again from `site`, not stored. (Recovering x̂ from out as
// (out - beta) / gamma would save the res write but divides by gamma and changes the bits.)
struct ResidualLayernormFwdArgs {
  Act out;
  Act res;
  float* mean;
  float* rstd;
  ConstAct in;
  ConstAct residual;
  const float* gamma;
  const float* beta;
  int64_t M;
  int N;
  float eps;
  DropoutSite site;
};
// Its backward: d_res = LayerNorm backward of dout; d_residual = d_res (overwritten; may alias
// dout), d_in = d_res ⊙ mask / (1 - p) (overwritten; aliases neither); dgamma, dbeta [N]
// accumulate (+=), reduced in a fixed order of row chunks.
struct ResidualLayernormBwdArgs {
  Act d_in;
  Act d_residual;
  float* dgamma;
  float* dbeta;
  ConstAct dout;
  ConstAct res;
  const float* mean;
  const float* rstd;
  const float* gamma;
  int64_t M;
  int N;
  DropoutSite site;
};

// ---- attention ----
// qkv [T, 3H] holds Q | K | V for each token (head h uses columns h*D..h*D+D-1 of each).
// For each sequence and head: P = softmax(Q K^T / sqrt(D) + key_bias), saved into probs
// (pre-dropout, layout per AttentionLayout::probs_offset, then [head][query][key]);
// ctx [T,H] = dropout(P) · V. key_bias [T] is the additive mask (0 or -10000) per key token.
struct AttentionFwdArgs {
  Act ctx;
  Act probs;
  ConstAct qkv;
  const float* key_bias;
  const AttentionLayout& layout;
  int heads;
  int head_dim;
  DropoutSite site;
};
// dqkv [T,3H] (overwritten) from dctx [T,H], using the saved probs, the forward's output ctx
// (unchanged since; a fused attention reads it back) and the same site.
struct AttentionBwdArgs {
  Act dqkv;
  ConstAct dctx;
  ConstAct ctx;
  ConstAct qkv;
  ConstAct probs;
  const AttentionLayout& layout;
  int heads;
  int head_dim;
  DropoutSite site;
};

// ---- gathers for the heads ----
// out[i] = in[rows[i]] for i < n (rows of width H).
struct GatherRowsArgs {
  Act out;
  ConstAct in;
  const int32_t* rows;
  int64_t n;
  int H;
};
// dst[rows[i]] += src[i], deterministically (rows may repeat).
struct ScatterAddRowsArgs {
  Act dst;
  ConstAct src;
  const int32_t* rows;
  int64_t n;
  int H;
};

// ---- loss ----
// Softmax cross-entropy per row of logits[M, ld] over the first V columns (columns V..ld-1
// are padding and are excluded). Row i with labels[i] < 0 is ignored (loss 0, gradient 0).
// losses[M] = logsumexp - logit[label]; correct[M] = (argmax == label) (may be null);
// dlogits[M, ld] = (softmax - onehot) · grad_scale, 0 in padding columns (grad_scale may be
// read from backend memory as the work runs: ScaleArg). dlogits may alias logits.
struct SoftmaxXentArgs {
  Act dlogits;
  float* losses;
  int32_t* correct;
  ConstAct logits;
  const int32_t* labels;
  int64_t M;
  int V;
  int ld;
  ScaleArg grad_scale;
};

// ---- optimizer ----
// host_out[s] = Σ x[i]^2 over segment s, in a fixed order (deterministic).
struct SegmentSumsqArgs {
  double* host_out;
  const float* x;
  const std::vector<ParamSegment>& segs;
};
// Per element of each segment: g = grad·grad_scale; m = β1 m + (1-β1) g;
// v = β2 v + (1-β2) g²; update = (m/bc1) / (sqrt(v/bc2) + eps) + weight_decay_s · param.
// With host_sumsq (2 · segments doubles, host memory) the same pass also gives what LAMB's trust
// ratios need: host_sumsq[s] = Σ param² and host_sumsq[S + s] = Σ update² over segment s,
// equal to segment_sumsq of param and of the new update (same chunks, same summation order).
struct AdamDirectionArgs {
  float* update;
  float* m;
  float* v;
  const float* grad;
  const float* param;
  const std::vector<ParamSegment>& segs;
  AdamStepArgs args;
  double* host_sumsq = nullptr;
};
// param -= host_scale[s] · update over each segment s.
struct ApplyUpdateArgs {
  float* param;
  const float* update;
  const std::vector<ParamSegment>& segs;
  const std::vector<float>& host_scale;
};
// One unsharded optimizer step over the tensors `segs` with its scalars in backend memory
// (`state`, see OptimizerStepState), queued without a host transfer so that recorded work can
// hold it: the gradient's Σ grad² per segment, derive_step_scalars (norm, skip flag, clipped
// gradient factor), adam_direction (with LAMB's sums), each segment's update_scale and
// apply_update; a skipped step leaves moments and weights as they were. The same bits as those
// ops driven from the host with the same scalar functions (Optimizer::step).
struct OptimizerStepArgs {
  float* param;
  float* m;
  float* v;
  float* update;
  const float* grad;
  const std::vector<ParamSegment>& segs;
  TrustRatio trust;
  OptimizerStepState* state;
};

// Every numeric op as X(name, argument struct), the one list of them: Ops declares for each a
// public method `name` (ops.cpp: checks, observers) and a private pure `name##_impl`, and a backend
// declares its implementations with BERT_NUMERIC_OPS(BERT_OP_OVERRIDE).
#define BERT_NUMERIC_OPS(X)                           \
  X(embedding_fwd, EmbeddingFwdArgs)                  \
  X(embedding_bwd, EmbeddingBwdArgs)                  \
  X(linear_fwd, LinearFwdArgs)                        \
  X(linear_bwd, LinearBwdArgs)                        \
  X(activation_fwd, ActivationFwdArgs)                \
  X(layernorm_fwd, LayernormFwdArgs)                  \
  X(layernorm_bwd, LayernormBwdArgs)                  \
  X(dropout_residual_fwd, DropoutResidualFwdArgs)     \
  X(dropout_bwd, DropoutBwdArgs)                      \
  X(residual_layernorm_fwd, ResidualLayernormFwdArgs) \
  X(residual_layernorm_bwd, ResidualLayernormBwdArgs) \
  X(attention_fwd, AttentionFwdArgs)                  \
  X(attention_bwd, AttentionBwdArgs)                  \
  X(gather_rows, GatherRowsArgs)                      \
  X(scatter_add_rows, ScatterAddRowsArgs)             \
  X(softmax_xent, SoftmaxXentArgs)                    \
  X(segment_sumsq, SegmentSumsqArgs)                  \
  X(adam_direction, AdamDirectionArgs)                \
  X(apply_update, ApplyUpdateArgs)                    \
  X(optimizer_step, OptimizerStepArgs)
#define BERT_OP_OVERRIDE(name, Args) void name##_impl(const Args& a) override;
// The rest of a backend's implementations (memory, synchronize, scale), which take plain
// arguments: declared in its class by this one line beside BERT_NUMERIC_OPS(BERT_OP_OVERRIDE).
#define BERT_PLAIN_OVERRIDES                                                   \
  void* alloc_impl(size_t bytes) override;                                     \
  void release_impl(void* ptr) override;                                       \
  void upload_impl(void* dst, const void* host_src, size_t bytes) override;    \
  void download_impl(void* host_dst, const void* src, size_t bytes) override;  \
  void copy_impl(void* dst, const void* src, size_t bytes) override;           \
  void fill_zero_impl(void* dst, size_t bytes) override;                       \
  void synchronize_impl() override;                                            \
  void scale_impl(float* x, float a, int64_t n) override;

// Backend work recorded once and run again (a CUDA graph): replay() queues it as recorded, reading
// memory when it runs, so inputs uploaded before a replay are what it sees. A recording holds the
// backend's internal buffers by address: replay() returns false, queueing nothing, once the
// backend has freed any of its memory since (a scratch buffer grew), and the work must be recorded
// again.
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  virtual bool replay() = 0;
};

// One piece of work run through recordings (run_recorded): its recording, once made.
struct RecordingSlot {
  std::unique_ptr<RecordedWork> work;
  bool seen = false;  // the work ran once (directly), so its scratch buffers have grown
};
enum class RecordedRun { direct, recorded, replayed };
class Ops;
// Runs `body` as recorded work: directly the first time (scratch buffers grow), recorded and
// replayed the second (when the backend can record), replayed after; when a replay is refused
// (the backend freed memory since), directly once more and recorded the time after. The work the
// body queues must be the same each time, its changing values read from backend memory.
RecordedRun run_recorded(Ops& ops, RecordingSlot& slot, const std::function<void()>& body);

// Told of each call of an Ops' public methods by its name ("linear_fwd", "linear_fwd+activation"
// for a dense layer with its activation, "upload", ...): a profiler timing them (op_profiler.h),
// a debug check synchronising after each (op_sync_check.h), a test counting what each queues.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void before(Ops& ops, const char* op) = 0;
  virtual void after(Ops& ops, const char* op) = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string name() const = 0;

  // ---- observers ----------------------------------------------------------------------
  // Each observer is told of every call of a public method below (memory, synchronize and the
  // ops) before it runs and after it returns, in the order added; not of calls made while one is
  // running (a backend's own uploads inside an op, an observer's synchronize). Not owned.
  void add_observer(OpObserver* observer);
  void remove_observer(OpObserver* observer);

  // ---- memory -------------------------------------------------------------------------
  void* alloc(size_t bytes);  // zero-filled; throws Error(out_of_memory)
  void release(void* ptr);
  void upload(void* dst, const void* host_src, size_t bytes);
  void download(void* host_dst, const void* src, size_t bytes);
  void copy(void* dst, const void* src, size_t bytes);
  void fill_zero(void* dst, size_t bytes);
  void synchronize();
  // Peak bytes of backend memory held at once since creation (arena accounting).
  virtual size_t peak_bytes() const = 0;
  // The backend's work queue (a cudaStream_t for CUDA; null for the CPU, which runs in order),
  // so a communicator can start a collective after the work queued so far.
  virtual void* native_stream() { return nullptr; }
  // The GPU the backend's work runs on (-1: none, the CPU).
  virtual int device() const { return -1; }
  // False for a backend that only accounts for the work (the cost model without an inner
  // backend): its memory holds no values, so none need computing for it.
  virtual bool holds_values() const { return true; }
  // The storage type of every activation tensor the ops take (Act / ConstAct); the public
  // methods reject views of another type with Error(internal).
  virtual DType activation_type() const = 0;
  // Elements of the probs buffer attention_fwd/bwd need for batches of at most max_seqs
  // sequences of at most max_len tokens: the saved probabilities (heads · Σ len², at most
  // max_seqs · heads · max_len²) for the reference attention; a backend whose attention saves
  // less (cuDNN's softmax statistics, heads · tokens) says so.
  virtual int64_t attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const {
    return max_seqs * heads * max_len * max_len;
  }
  // attention_saved_elems of a fused attention: its fp32 softmax statistics (heads · tokens
  // values) as elements of the activation type (two 16-bit elements per value).
  int64_t fused_attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const {
    return max_seqs * heads * max_len * static_cast<int64_t>(sizeof(float) / dtype_bytes(activation_type()));
  }

  // Records the work `body` queues without running it (nothing is computed or written), for
  // replay(); null from a backend that cannot record (the CPU's computes as it is called). The
  // work must not wait for the backend (no download, no synchronize) and must not make its
  // scratch buffers grow: run the same work once directly first. An exception from `body` ends
  // the recording and propagates.
  virtual std::unique_ptr<RecordedWork> record(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }

  // ---- weights ------------------------------------------------------------------------
  // The flat fp32 parameter buffer (master weights). A backend that feeds GEMMs in low
  // precision keeps one low-precision copy of it, refreshed lazily after weights_changed(),
  // which every writer of the parameters calls (optimizer step, loads, broadcast).
  virtual void set_weights(const float* params, int64_t n) { (void)params, (void)n; }
  virtual void weights_changed() {}
  // Refreshes that low-precision copy now if weights changed, rather than in the first op that
  // reads it: recorded work must not contain the refresh (it would repeat on every replay) nor
  // miss one (it would replay on stale weights), so callers refresh before recording or replaying.
  virtual void refresh_weights() {}

  // ---- the numeric ops (BERT_NUMERIC_OPS): arguments and meaning in their structs above ----
#define BERT_OP_METHOD(name, Args) void name(const Args& a);
  BERT_NUMERIC_OPS(BERT_OP_METHOD)
#undef BERT_OP_METHOD
  // x *= a over n elements.
  void scale(float* x, float a, int64_t n);

 private:
  // Runs call() between the observers' before(op) and after(op), unless a call is running.
  template <typename Call>
  void observed(const char* op, Call&& call) {
    if (observers_.empty() || observing_) {
      call();
      return;
    }
    struct Running {
      bool& flag;
      explicit Running(bool& f) : flag(f) { flag = true; }
      ~Running() { flag = false; }
    } running(observing_);
    notify(true, op);
    call();
    notify(false, op);
  }
  void notify(bool before, const char* op);

  std::vector<OpObserver*> observers_;
  bool observing_ = false;

  // The backends' implementations: called by the public methods above once the arguments
  // passed their checks (ops.cpp), so they start at the math.
  virtual void* alloc_impl(size_t bytes) = 0;
  virtual void release_impl(void* ptr) = 0;
  virtual void upload_impl(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download_impl(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_impl(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero_impl(void* dst, size_t bytes) = 0;
  virtual void synchronize_impl() = 0;
#define BERT_OP_PURE(name, Args) virtual void name##_impl(const Args& a) = 0;
  BERT_NUMERIC_OPS(BERT_OP_PURE)
#undef BERT_OP_PURE
  virtual void scale_impl(float* x, float a, int64_t n) = 0;
};

// Backend factories. make_cpu_ops is always available; threads <= 0 means all cores; bf16 gives
// the dense layers bf16 inputs (CPUs with native bf16 only); tf32 and fp16 are refused (GPU only).
std::unique_ptr<Ops> make_cpu_ops(int threads, Precision precision = Precision::fp32);
// Return null when the engine was built without CUDA.
struct CudaOptions {
  // GEMM input precision; accumulation is fp32.
  Precision precision = Precision::tf32;
  // Attention through cuDNN's fused scaled-dot-product attention instead of the reference
  // GEMM + softmax kernels (needs a build with cudnn-frontend; its dropout masks are cuDNN's).
  bool fused_attention = false;
  // Tests: variable-length batches of the fused attention through cuDNN's padded graphs on
  // padded copies (the path of GPUs without cuDNN's ragged backward) on Hopper-class GPUs too.
  bool fused_attention_pad_varlen = false;
  // With bf16/fp16: store activations, their gradients and the saved tensors in that 16-bit
  // type (activation_type()), the GEMMs and the fused attention reading and writing them
  // directly; otherwise they are fp32 and cast before each GEMM.
  bool activations_16bit = false;
  // Tests: refuse (Error(unsupported), naming the shape) where cuDNN offers no deterministic fused
  // attention backward, instead of falling back to the non-deterministic one (a bitwise test
  // would then fail looking like a graph bug).
  bool fused_attention_deterministic_only = false;
};
std::unique_ptr<Ops> make_cuda_ops(int device);
std::unique_ptr<Ops> make_cuda_ops(int device, const CudaOptions& options);
bool cuda_available();

}  // namespace bert
