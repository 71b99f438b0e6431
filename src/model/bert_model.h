// BertModel: BERT's encoder with the task's head (pretraining MLM + NSP, sequence
// classification/regression, question answering, token classification), forward and backward
// written once against the Ops interface. It owns the flat parameter and gradient buffers and
// one activation arena sized at creation for the largest micro-batch, so a step allocates
// nothing; an inference model has no gradient buffer and keeps two layers' activations.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "model/bert_config.h"
#include "model/model_inputs.h"
#include "model/param_table.h"
#include "model/task_config.h"

namespace bert {

// What the activation arena must hold. Recomputation trades compute for memory: the GELU
// output (recompute_gelu) or the attention probabilities (recompute_attention) are kept for
// one layer only and recomputed from the saved inputs in backward.
struct ModelLimits {
  int max_batch = 0;        // sequences per micro-batch
  int max_seq_length = 0;   // tokens per sequence
  int max_predictions = 0;  // masked positions per sequence
  bool recompute_gelu = false;
  bool recompute_attention = false;
  bool inference = false;   // forward only: no gradients, activations of two layers
};

// Sums over one micro-batch; losses are sums so callers can average as they need.
struct ForwardStats {
  double mlm_loss_sum = 0, nsp_loss_sum = 0;
  int64_t mlm_count = 0, nsp_count = 0;
  int64_t mlm_correct = 0, nsp_correct = 0;
  // Fine-tuning heads: the micro-batch's loss as Hugging Face defines it is
  // task_loss_sum / task_count (count: sequences, or labelled tokens for token classification);
  // task_correct counts argmax hits (QA: sequences whose start and end are both right).
  double task_loss_sum = 0;
  int64_t task_count = 0, task_correct = 0;
  // Question answering: the start and the end cross-entropy, each summed over the sequences whose
  // position is inside the sequence, and those counts (HF's loss: the mean of the two means).
  double start_loss_sum = 0, end_loss_sum = 0;
  int64_t start_count = 0, end_count = 0;
  double mlm_loss() const { return mlm_count ? mlm_loss_sum / mlm_count : 0.0; }
  double nsp_loss() const { return nsp_count ? nsp_loss_sum / nsp_count : 0.0; }
  double task_loss() const { return task_count ? task_loss_sum / task_count : 0.0; }
  // Adds another micro-batch's sums and counts (every field: the ones a run does not fill are 0).
  ForwardStats& operator+=(const ForwardStats& o) {
    mlm_loss_sum += o.mlm_loss_sum, nsp_loss_sum += o.nsp_loss_sum;
    mlm_count += o.mlm_count, nsp_count += o.nsp_count;
    mlm_correct += o.mlm_correct, nsp_correct += o.nsp_correct;
    task_loss_sum += o.task_loss_sum, task_count += o.task_count, task_correct += o.task_correct;
    start_loss_sum += o.start_loss_sum, end_loss_sum += o.end_loss_sum;
    start_count += o.start_count, end_count += o.end_count;
    return *this;
  }
};

// What an inference forward copies out, into host memory, in the batch's [B, S] layout (padding
// positions are 0): the head's logits, the pooler output, or the last hidden states.
enum class ModelOutput { logits, pooled, hidden };
struct OutputRequest {
  ModelOutput what = ModelOutput::logits;
  float* host = nullptr;  // output_elems(...) floats
};

// How a training forward runs its backward. The loss gradient is multiplied by loss_scale
// (fp16 loss scaling). on_grads_ready(offset), when set, is called as soon as every gradient
// at flat offset >= `offset` is final for this micro-batch: once after the heads, once per
// encoder layer (last first), and with 0 after the embeddings — so a caller can start
// reducing gradients while the backward pass goes on.
// recorded: run the forward and backward as work the backend recorded for this micro-batch's shape
// (CUDA graphs; pretraining, padded batches): the first micro-batch of a shape runs directly, the
// second records it, later ones replay it, with the inputs and the dropout step uploaded before.
// Results equal the direct run's bit for bit. With on_grads_ready the work it queues on the
// backend (the same for every micro-batch of that shape) is recorded too; a replay queues it again
// without calling it (recording_counts().replayed tells the caller).
struct BackwardOptions {
  float loss_scale = 1.0f;
  std::function<void(int64_t offset)> on_grads_ready;
  bool recorded = false;
};

// How often run() recorded its work and replayed a recording.
struct RecordingCounts {
  int64_t recorded = 0, replayed = 0;
};

struct DropoutStream {
  bool enabled = false;
  uint64_t seed = 0;
  uint64_t step = 0;  // one value per micro-batch forward
};

class BertModel {
 public:
  BertModel(const BertConfig& config, const TaskConfig& task, const ModelLimits& limits, Ops& ops);
  ~BertModel();
  BertModel(const BertModel&) = delete;
  BertModel& operator=(const BertModel&) = delete;

  const BertConfig& config() const { return config_; }
  const TaskConfig& task() const { return task_; }
  bool inference() const { return limits_.inference; }
  // Floats of an output for B sequences of length S: logits [B, 2] (NSP) / [B, num_labels]
  // (sequence) / [B, S, num_labels] (token) / [B, 2, S] (QA: start then end logits); pooled
  // [B, H]; hidden [B, S, H]. Throws Error(invalid_argument) for the pooler of a model without one.
  int64_t output_elems(ModelOutput what, int B, int S) const;
  const ParamTable& params() const { return table_; }
  float* param_data() { return params_; }
  float* grad_data() { return grads_; }
  size_t arena_bytes() const { return arena_bytes_; }
  const RecordingCounts& recording_counts() const { return recording_counts_; }

  // normal(0, initializer_range) weights from Philox(seed), zero biases, LayerNorm (1, 0).
  void init_weights(uint64_t seed);
  void zero_grads();

  // Forward; with `backward` (non-null) also accumulates (+=) the gradient of loss_scale · the
  // task's loss (pretraining: mean MLM loss + mean NSP loss) into the gradient buffer. Losses
  // are computed when the inputs carry labels. `output` (may be null) receives a copy of an
  // output. `abort` is polled between layers.
  ForwardStats run(const ModelInputs& inputs, const DropoutStream& dropout, const BackwardOptions* backward,
                   const std::atomic<bool>* abort, const OutputRequest* output = nullptr);

 private:
  // Activations and their gradients are stored in ops_.activation_type() (Act); LayerNorm
  // statistics, the key bias and the per-row losses stay fp32.
  struct LayerActs {
    Act qkv, ctx, probs, res1, h1, pre, inter, res2, out;
    float *mean1, *rstd1, *mean2, *rstd2;
  };
  // What a recording depends on besides buffer contents: the shapes and the kernels' arguments.
  struct RecordingKey {
    int64_t batch, tokens;
    float loss_scale;
    bool dropout;
    uint64_t seed;
    bool grads_ready;  // the backward calls on_grads_ready, whose queued work is recorded with it
    auto operator<=>(const RecordingKey&) const = default;
  };
  void upload_inputs(const ModelInputs& in);
  // The forward (and backward) after the inputs are uploaded. Pretraining leaves its per-row
  // losses in losses_ (NSP rows, then MLM rows) for pretraining_losses().
  ForwardStats compute(const ModelInputs& in, const DropoutStream& drop, const BackwardOptions* backward,
                       const std::atomic<bool>* abort, const OutputRequest* output);
  // compute() as recorded work: run directly, recorded or replayed (BackwardOptions::recorded).
  void compute_recorded(const ModelInputs& in, const DropoutStream& drop, const BackwardOptions& backward,
                        const std::atomic<bool>* abort);
  // The NSP and MLM loss sums, counts and hits of the last pretraining forward over B sequences
  // and `rows` MLM rows of which `masked` are labelled.
  ForwardStats pretraining_losses(int B, int64_t rows, int64_t masked) const;
  DropoutSite site(const DropoutStream& d, uint32_t tensor_id, float p) const;
  // The dropout sites: forward and backward draw a mask from the same one.
  enum class LayerDropout : uint32_t { attention_probs = 1, attention_output = 2, ffn_output = 3 };
  DropoutSite embedding_dropout(const DropoutStream& d) const;
  DropoutSite layer_dropout(const DropoutStream& d, int layer, LayerDropout which) const;
  DropoutSite head_dropout(const DropoutStream& d) const;  // the fine-tuning classifiers' input
  void check_abort(const std::atomic<bool>* abort) const;
  // compute()'s parts, in the order it runs them.
  void embeddings_forward(const ModelInputs& in, const DropoutStream& drop);  // into hidden0_
  // The last hidden states [T,H]; with cls_only the last layer's [CLS] rows alone, in cls_h_ [B,H].
  ConstAct encoder_forward(const ModelInputs& in, const DropoutStream& drop, const std::atomic<bool>* abort,
                           bool cls_only);
  void layer_after_attention(const DropoutStream& drop, int l, ConstAct ctx, ConstAct h_in, int64_t M, Act out);
  // The task's head on the last hidden states h [T,H] (or cls_h_, see encoder_forward): its
  // outputs, its losses when the inputs carry labels, and with `backward` its gradients and
  // dL/dh in g0_. One function per head (head_*.cpp), all with this shape.
  ForwardStats head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward, float loss_scale,
                    const OutputRequest* output);
  // The [CLS] rows of h into cls_h_ (nothing to do when h is cls_h_, the [CLS]-only encoder's).
  void gather_cls(ConstAct h, int B);
  ForwardStats pretraining_head(const ModelInputs& in, ConstAct h, bool backward, float loss_scale,
                                const OutputRequest* output);
  ForwardStats sequence_head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward,
                             float loss_scale, const OutputRequest* output);
  ForwardStats token_head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward, float loss_scale,
                          const OutputRequest* output);
  ForwardStats qa_head(const ModelInputs& in, ConstAct h, bool backward, float loss_scale, const OutputRequest* output);
  // From dL/dh in g0_ to dL/d(embedding output), calling grads_ready after each layer; returns
  // the buffer (g0_ or g1_) holding the result.
  ConstAct encoder_backward(const ModelInputs& in, const DropoutStream& drop, const std::atomic<bool>* abort,
                            const std::function<void(int64_t)>& grads_ready);
  void embeddings_backward(const ModelInputs& in, const DropoutStream& drop, ConstAct dh);
  // Cross-entropy over rows [M, V] of `logits` with labels at `labels` (host copy host_labels;
  // negative: ignored), mean over the labelled rows times `scale`; leaves the gradient in
  // `logits` and per-row hits in `hits`.
  struct CrossEntropy {
    double loss;  // mean over the labelled rows
    int64_t count, correct;
  };
  CrossEntropy cross_entropy(Act logits, const int32_t* labels, const int32_t* host_labels, int64_t M, int V,
                             float scale, std::vector<int32_t>& hits);
  // Rows [T, width] of a per-token tensor into host [B, S, width] (padding positions 0).
  void copy_out_tokens(float* host, ConstAct rows, const ModelInputs& in, int width) const;
  // n activations into host floats (16-bit ones widened), and host floats into n activations.
  void download_act(float* host, ConstAct src, int64_t n) const;
  void upload_act(Act dst, const float* host, int64_t n) const;

  BertConfig config_;
  TaskConfig task_;
  ModelLimits limits_;
  Ops& ops_;
  ParamTable table_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  // Whether the running forward has no backward pass (set by compute; its dense layers say so).
  bool forward_only_ = false;

  // Arena: one allocation carved into the buffers below.
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  int32_t *word_ids_, *pos_ids_, *type_ids_, *cls_rows_, *mlm_rows_, *mlm_labels_, *nsp_labels_;
  float* key_bias_;
  // What changes between replays of recorded work, uploaded before each: the dropout step and the
  // MLM gradient's scale (loss scale / masked tokens; recorded batches have a fixed number of MLM
  // rows, the unlabelled ones ignored).
  struct ReplayArgs {
    uint64_t dropout_step;
    float mlm_grad_scale;
  };
  ReplayArgs* replay_args_;                  // device
  const ReplayArgs* replay_at_ = nullptr;    // replay_args_ while running recorded work, else null
  std::map<RecordingKey, RecordingSlot> recordings_;
  RecordingCounts recording_counts_;
  Act emb_sum_, emb_ln_, hidden0_;  // [T,H] embeddings
  float *emb_mean_, *emb_rstd_;     // [T]
  std::vector<LayerActs> acts_;  // with recomputation, every layer's inter or probs is one shared buffer
  Act scratch_th_;                                        // [T,H]
  Act cls_h_, pool_pre_, pooled_, nsp_logits_;            // [B,H], [B,H], [B,H], [B,2]
  Act mlm_h_, mlm_pre_, mlm_act_, mlm_ln_, logits_;       // [Nm,*]
  float *mlm_mean_, *mlm_rstd_;                           // [Nm]
  float *losses_;                                         // [R = max(B + Nm, 2B, T for per-token heads)]
  int32_t* correct_;                                      // [R]
  Act head_logits_;                                       // [T, num_labels] / [B, num_labels] / [2, T] (QA)
  int32_t* head_labels_;                                  // [R]
  Act g0_, g1_, g2_, gqkv_, gi0_, gi1_;                   // backward scratch
  Act g_cls_, g_pooled_, g_pool_pre_, g_mlm_h_, g_mlm_ln_, g_mlm_act_;
};

}  // namespace bert
