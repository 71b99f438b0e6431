// BertModel: BERT-for-pretraining forward and backward, written once against the Ops interface.
// It owns the flat parameter and gradient buffers and one activation arena sized at creation
// for the largest micro-batch, so a step allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/ops.h"
#include "model/bert_config.h"
#include "model/model_inputs.h"
#include "model/param_table.h"

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
};

// Sums over one micro-batch; losses are sums so callers can average as they need.
struct ForwardStats {
  double mlm_loss_sum = 0, nsp_loss_sum = 0;
  int64_t mlm_count = 0, nsp_count = 0;
  int64_t mlm_correct = 0, nsp_correct = 0;
  double mlm_loss() const { return mlm_count ? mlm_loss_sum / mlm_count : 0.0; }
  double nsp_loss() const { return nsp_count ? nsp_loss_sum / nsp_count : 0.0; }
};

// How a training forward runs its backward. The loss gradient is multiplied by loss_scale
// (fp16 loss scaling). on_grads_ready(offset), when set, is called as soon as every gradient
// at flat offset >= `offset` is final for this micro-batch: once after the heads, once per
// encoder layer (last first), and with 0 after the embeddings — so a caller can start
// reducing gradients while the backward pass goes on.
struct BackwardOptions {
  float loss_scale = 1.0f;
  std::function<void(int64_t offset)> on_grads_ready;
};

struct DropoutStream {
  bool enabled = false;
  uint64_t seed = 0;
  uint64_t step = 0;  // one value per micro-batch forward
};

class BertModel {
 public:
  BertModel(const BertConfig& config, const ModelLimits& limits, Ops& ops);
  ~BertModel();
  BertModel(const BertModel&) = delete;
  BertModel& operator=(const BertModel&) = delete;

  const BertConfig& config() const { return config_; }
  const ParamTable& params() const { return table_; }
  float* param_data() { return params_; }
  float* grad_data() { return grads_; }
  size_t arena_bytes() const { return arena_bytes_; }

  // normal(0, initializer_range) weights from Philox(seed), zero biases, LayerNorm (1, 0).
  void init_weights(uint64_t seed);
  void zero_grads();

  // Forward; with `backward` (non-null) also accumulates (+=) the gradient of
  // loss_scale · (mean MLM loss + mean NSP loss) into the gradient buffer. `abort` is polled
  // between layers.
  ForwardStats run(const ModelInputs& inputs, const DropoutStream& dropout, const BackwardOptions* backward,
                   const std::atomic<bool>* abort);

 private:
  struct LayerActs {
    float *qkv, *ctx, *probs, *res1, *mean1, *rstd1, *h1, *pre, *inter, *res2, *mean2, *rstd2, *out;
  };
  void upload_inputs(const ModelInputs& in);
  DropoutSite site(const DropoutStream& d, uint32_t tensor_id, float p) const;
  void check_abort(const std::atomic<bool>* abort) const;

  BertConfig config_;
  ModelLimits limits_;
  Ops& ops_;
  ParamTable table_;
  float* params_ = nullptr;
  float* grads_ = nullptr;

  // Arena: one allocation carved into the buffers below.
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  int32_t *word_ids_, *pos_ids_, *type_ids_, *cls_rows_, *mlm_rows_, *mlm_labels_, *nsp_labels_;
  float* key_bias_;
  float *emb_sum_, *emb_mean_, *emb_rstd_, *emb_ln_, *hidden0_;  // [T,H] embeddings
  std::vector<LayerActs> acts_;  // with recomputation, every layer's inter or probs is one shared buffer
  float *scratch_th_;                                          // [T,H]
  float *cls_h_, *pool_pre_, *pooled_, *nsp_logits_;             // [B,H], [B,H], [B,H], [B,2]
  float *mlm_h_, *mlm_pre_, *mlm_act_, *mlm_mean_, *mlm_rstd_, *mlm_ln_, *logits_;  // [Nm,*]
  float *losses_;                                              // [max(Nm, B)]
  int32_t* correct_;                                           // [max(Nm, B)]
  float *g0_, *g1_, *g2_, *gqkv_, *gi0_, *gi1_;                // backward scratch
  float *g_cls_, *g_pooled_, *g_mlm_h_, *g_mlm_ln_, *g_mlm_act_;
};

}  // namespace bert
