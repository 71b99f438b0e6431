// Hugging Face's BertForSequenceClassification head: pooled = tanh(dense([CLS])), logits =
// classifier(dropout(pooled)) [B, num_labels]; cross-entropy, or the mean squared error when
// num_labels == 1 (regression: the loss and its gradient computed on the host from B logits).
#include "model/bert_model.h"

namespace bert {

ForwardStats BertModel::sequence_head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward,
                                      float loss_scale, const OutputRequest* output) {
  const ParamTable& P = table_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens();
  const int B = in.batch_size(), H = config_.hidden_size, NL = task_.num_labels;
  const DropoutSite dropout = head_dropout(drop);
  ForwardStats stats;
  gather_cls(h, B);
  ops_.linear_fwd({pooled_, pool_pre_, cls_h_, W + P.pooler_w, W + P.pooler_b, B, H, H,
                   Activation::tanh, forward_only_});
  ops_.dropout_residual_fwd({scratch_th_, pooled_, nullptr, int64_t{B} * H, dropout});
  ops_.linear_fwd({head_logits_, nullptr, scratch_th_, W + P.head_w, W + P.head_b, B, H, NL,
                   Activation::none, forward_only_});
  if (output && output->what == ModelOutput::pooled) download_act(output->host, pooled_, int64_t{B} * H);
  if (output && output->what == ModelOutput::logits) download_act(output->host, head_logits_, int64_t{B} * NL);
  if (!in.has_labels) return stats;
  if (task_.regression()) {
    std::vector<float> x(B), grad(B);
    download_act(x.data(), head_logits_, B);
    for (int b = 0; b < B; ++b) {
      const double d = static_cast<double>(x[b]) - in.task_targets[b];
      stats.task_loss_sum += d * d;
      grad[b] = static_cast<float>(2.0 * d / B * loss_scale);
    }
    upload_act(head_logits_, grad.data(), B);
  } else {
    std::vector<int32_t> hits;
    const CrossEntropy ce = cross_entropy(head_logits_, head_labels_, in.task_labels.data(), B, NL, loss_scale, hits);
    stats.task_loss_sum = ce.loss * B;
    stats.task_correct = ce.correct;
  }
  stats.task_count = B;
  if (!backward) return stats;
  ops_.linear_bwd({g2_, G + P.head_w, G + P.head_b, head_logits_, scratch_th_, W + P.head_w, nullptr, nullptr, B, H, NL,
                   Activation::none, false});
  ops_.dropout_bwd({g_pooled_, g2_, int64_t{B} * H, dropout});
  ops_.linear_bwd({g_cls_, G + P.pooler_w, G + P.pooler_b, g_pooled_, cls_h_, W + P.pooler_w, pool_pre_, g_pool_pre_, B,
                   H, H, Activation::tanh, false});
  ops_.fill_zero(g0_.data, T * H * dtype_bytes(g0_.type));
  ops_.scatter_add_rows({g0_, g_cls_, cls_rows_, B, H});
  return stats;
}

}  // namespace bert
