// Hugging Face's BertForQuestionAnswering head: start and end logits [B, S] from the two rows of
// qa_outputs (no dropout, as HF); the loss is the mean of the start and the end cross-entropy,
// each over the sequences whose position is inside the sequence.
#include "model/bert_model.h"

#include <algorithm>

namespace bert {

ForwardStats BertModel::qa_head(const ModelInputs& in, ConstAct h, bool backward, float loss_scale,
                                const OutputRequest* output) {
  const ParamTable& P = table_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens();
  const int B = in.batch_size(), S = in.seq_length, H = config_.hidden_size;
  ForwardStats stats;
  const Act start = head_logits_;
  const Act end = head_logits_ + T;
  ops_.linear_fwd({start, nullptr, h, W + P.head_w, W + P.head_b, T, H, 1, Activation::none, forward_only_});
  ops_.linear_fwd({end, nullptr, h, W + P.head_w + H, W + P.head_b + 1, T, H, 1, Activation::none, forward_only_});
  if (output && output->what == ModelOutput::logits) {  // [B, 2, S]: start then end logits
    std::vector<float> s_host(static_cast<size_t>(B) * S), e_host(static_cast<size_t>(B) * S);
    copy_out_tokens(s_host.data(), start, in, 1);
    copy_out_tokens(e_host.data(), end, in, 1);
    for (int b = 0; b < B; ++b) {
      std::copy_n(s_host.data() + int64_t{b} * S, S, output->host + int64_t{b} * 2 * S);
      std::copy_n(e_host.data() + int64_t{b} * S, S, output->host + int64_t{b} * 2 * S + S);
    }
  }
  if (!in.has_labels) return stats;
  std::vector<int32_t> start_hits, end_hits;
  const CrossEntropy start_ce =
      cross_entropy(start, head_labels_, in.task_labels.data(), B, S, loss_scale * 0.5f, start_hits);
  const CrossEntropy end_ce =
      cross_entropy(end, head_labels_ + B, in.task_labels.data() + B, B, S, loss_scale * 0.5f, end_hits);
  stats.task_loss_sum = (start_ce.loss + end_ce.loss) / 2 * B;
  stats.task_count = B;
  stats.start_loss_sum = start_ce.loss * start_ce.count;
  stats.start_count = start_ce.count;
  stats.end_loss_sum = end_ce.loss * end_ce.count;
  stats.end_count = end_ce.count;
  for (int b = 0; b < B; ++b) {
    stats.task_correct += in.task_labels[b] >= 0 && in.task_labels[B + b] >= 0 && start_hits[b] && end_hits[b];
  }
  if (!backward) return stats;
  ops_.linear_bwd({g0_, G + P.head_w, G + P.head_b, start, h, W + P.head_w, nullptr, nullptr, T, H, 1,
                   Activation::none, false});
  ops_.linear_bwd({g0_, G + P.head_w + H, G + P.head_b + 1, end, h, W + P.head_w + H, nullptr, nullptr, T, H, 1,
                   Activation::none, true});
  return stats;
}

}  // namespace bert
