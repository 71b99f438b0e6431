// BERT's pretraining heads on the last hidden states: NSP (pooler tanh on the [CLS] rows, then a
// 2-way classifier) and MLM on the masked rows only (dense + activation, LayerNorm, the tied
// decoder — the padded word-embedding matrix — plus its bias; padding vocabulary columns are
// excluded from the softmax). Per-row losses stay on the device until run() reads them: NSP rows
// first, then MLM rows.
#include "model/bert_model.h"

namespace bert {

ForwardStats BertModel::pretraining_head(const ModelInputs& in, ConstAct h, bool backward, float loss_scale,
                                         const OutputRequest* output) {
  const ParamTable& P = table_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens(), Nm = static_cast<int64_t>(in.mlm_rows.size());
  const int B = in.batch_size(), H = config_.hidden_size, V = config_.vocab_size, Vp = config_.padded_vocab_size();
  const Activation act = config_.activation();
  ForwardStats stats;  // the losses are read by run() (pretraining_losses)

  gather_cls(h, B);
  ops_.linear_fwd({pooled_, pool_pre_, cls_h_, W + P.pooler_w, W + P.pooler_b, B, H, H,
                   Activation::tanh, forward_only_});
  ops_.linear_fwd({nsp_logits_, nullptr, pooled_, W + P.nsp_w, W + P.nsp_b, B, H, 2, Activation::none, forward_only_});
  if (output && output->what == ModelOutput::pooled) download_act(output->host, pooled_, int64_t{B} * H);
  if (output && output->what == ModelOutput::logits) download_act(output->host, nsp_logits_, int64_t{B} * 2);
  if (!in.has_labels) return stats;
  ops_.softmax_xent({nsp_logits_, losses_, correct_, nsp_logits_, nsp_labels_, B, 2, 2, loss_scale / B});
  if (backward) {  // nsp_logits_ now holds d(mean NSP loss)/dlogits
    ops_.linear_bwd({g_pooled_, G + P.nsp_w, G + P.nsp_b, nsp_logits_, pooled_, W + P.nsp_w, nullptr, nullptr, B, H, 2,
                     Activation::none, false});
    ops_.linear_bwd({g_cls_, G + P.pooler_w, G + P.pooler_b, g_pooled_, cls_h_, W + P.pooler_w, pool_pre_, g_pool_pre_,
                     B, H, H, Activation::tanh, false});
  }
  if (Nm > 0) {
    ops_.gather_rows({mlm_h_, h, mlm_rows_, Nm, H});
    ops_.linear_fwd({mlm_act_, mlm_pre_, mlm_h_, W + P.mlm_dense_w, W + P.mlm_dense_b, Nm, H, H, act, forward_only_});
    ops_.layernorm_fwd({mlm_ln_, mlm_mean_, mlm_rstd_, mlm_act_, W + P.mlm_ln_g, W + P.mlm_ln_b, Nm, H,
                        config_.layer_norm_eps});
    ops_.linear_fwd({logits_, nullptr, mlm_ln_, W + P.word_emb, W + P.mlm_bias, Nm, H, Vp,
                     Activation::none, forward_only_});
    const int64_t masked = in.mlm_labelled;  // Nm, or fewer in recorded work's fixed rows
    const ScaleArg mlm_scale(masked > 0 ? loss_scale / masked : 0.0f,
                             replay_at_ != nullptr ? &replay_at_->mlm_grad_scale : nullptr);
    ops_.softmax_xent({logits_, losses_ + B, correct_ + B, logits_, mlm_labels_, Nm, V, Vp, mlm_scale});
  }
  if (!backward) return stats;

  // Backward into dh = g0_ [T,H]: the [CLS] rows' and the masked rows' gradients.
  const Act dh = g0_;
  ops_.fill_zero(dh.data, T * H * dtype_bytes(dh.type));
  ops_.scatter_add_rows({dh, g_cls_, cls_rows_, B, H});
  if (Nm > 0) {
    ops_.linear_bwd({g_mlm_ln_, G + P.word_emb, G + P.mlm_bias, logits_, mlm_ln_, W + P.word_emb, nullptr, nullptr, Nm,
                     H, Vp, Activation::none, false});
    ops_.layernorm_bwd({g_mlm_act_, G + P.mlm_ln_g, G + P.mlm_ln_b, g_mlm_ln_, mlm_act_, mlm_mean_, mlm_rstd_,
                        W + P.mlm_ln_g, Nm, H});
    ops_.linear_bwd({g_mlm_h_, G + P.mlm_dense_w, G + P.mlm_dense_b, g_mlm_act_, mlm_h_, W + P.mlm_dense_w, mlm_pre_,
                     g_mlm_ln_, Nm, H, H, act, false});
    ops_.scatter_add_rows({dh, g_mlm_h_, mlm_rows_, Nm, H});
  }
  return stats;
}

}  // namespace bert
