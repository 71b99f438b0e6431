// Hugging Face's BertForTokenClassification head: logits = classifier(dropout(h)) [T, num_labels],
// cross-entropy over the labelled tokens.
#include "model/bert_model.h"

namespace bert {

ForwardStats BertModel::token_head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward,
                                   float loss_scale, const OutputRequest* output) {
  const ParamTable& P = table_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens();
  const int H = config_.hidden_size, NL = task_.num_labels;
  const DropoutSite dropout = head_dropout(drop);
  ForwardStats stats;
  ops_.dropout_residual_fwd({scratch_th_, h, nullptr, T * H, dropout});
  ops_.linear_fwd({head_logits_, nullptr, scratch_th_, W + P.head_w, W + P.head_b, T, H, NL,
                   Activation::none, forward_only_});
  if (output && output->what == ModelOutput::logits) copy_out_tokens(output->host, head_logits_, in, NL);
  if (!in.has_labels) return stats;
  std::vector<int32_t> hits;
  const CrossEntropy ce = cross_entropy(head_logits_, head_labels_, in.task_labels.data(), T, NL, loss_scale, hits);
  stats.task_loss_sum = ce.loss * ce.count;
  stats.task_count = ce.count;
  stats.task_correct = ce.correct;
  if (!backward) return stats;
  ops_.linear_bwd({g2_, G + P.head_w, G + P.head_b, head_logits_, scratch_th_, W + P.head_w, nullptr, nullptr, T, H, NL,
                   Activation::none, false});
  ops_.dropout_bwd({g0_, g2_, T * H, dropout});
  return stats;
}

}  // namespace bert
