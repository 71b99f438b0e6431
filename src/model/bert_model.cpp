// BertModel: construction, the run (direct or recorded), and the encoder's forward and backward
// (post-LN BERT, HF/NVIDIA DLE numerics) over the Ops interface as straight op lists. Dropout
// tensor ids (embedding_dropout, layer_dropout, head_dropout): 0 = embeddings; for layer l:
// 4l+1 attention probs, 4l+2 attention output, 4l+3 FFN output; 4L the classifier input of the
// fine-tuning heads. The heads live in head_*.cpp, one file each.
#include "model/bert_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/half.h"
#include "core/philox.h"

namespace bert {
namespace {

// Carves typed buffers out of one allocation; a first pass with base == nullptr only measures.
// Activations (act) are stored in the backend's activation type.
class Carver {
 public:
  Carver(char* base, DType activation_type) : base_(base), act_type_(activation_type) {}
  template <typename T>
  T* take(int64_t count) {
    return static_cast<T*>(take_bytes(static_cast<size_t>(count) * sizeof(T)));
  }
  Act act(int64_t count) { return Act(take_bytes(static_cast<size_t>(count) * dtype_bytes(act_type_)), act_type_); }
  size_t used() const { return used_; }

 private:
  void* take_bytes(size_t bytes) {
    size_t at = used_;
    used_ += (bytes + 63) / 64 * 64;
    return base_ ? base_ + at : nullptr;
  }
  char* base_;
  DType act_type_;
  size_t used_ = 0;
};

}  // namespace

BertModel::BertModel(const BertConfig& config, const TaskConfig& task, const ModelLimits& limits, Ops& ops)
    : config_(config), task_(task), limits_(limits), ops_(ops), table_(config, task) {
  params_ = static_cast<float*>(ops_.alloc(table_.total_elems * sizeof(float)));
  if (!limits.inference) grads_ = static_cast<float*>(ops_.alloc(table_.total_elems * sizeof(float)));
  ops_.set_weights(params_, table_.total_elems);

  const int64_t T = static_cast<int64_t>(limits.max_batch) * limits.max_seq_length;
  const int64_t B = limits.max_batch;
  const int64_t Nm = task.pretraining() ? B * limits.max_predictions : 0;
  const int64_t NL = task.num_labels;
  const int64_t R = std::max<int64_t>({B + Nm, 2 * B, task.per_token() ? T : 0, 1});
  const int64_t head_logits = task.pretraining() ? 0 : std::max(T * NL, 2 * T);
  const int64_t train = limits.inference ? 0 : 1;  // backward-only buffers are empty for inference
  const int64_t H = config.hidden_size, I = config.intermediate_size, A = config.num_attention_heads;
  const int64_t S = limits.max_seq_length;
  const int64_t Vp = config.padded_vocab_size();
  const int64_t NmB = std::max<int64_t>(std::max<int64_t>(Nm, B), 1);

  auto carve = [&](Carver& c) {
    word_ids_ = c.take<int32_t>(T);
    pos_ids_ = c.take<int32_t>(T);
    type_ids_ = c.take<int32_t>(T);
    cls_rows_ = c.take<int32_t>(B);
    mlm_rows_ = c.take<int32_t>(NmB);
    mlm_labels_ = c.take<int32_t>(NmB);
    nsp_labels_ = c.take<int32_t>(B);
    key_bias_ = c.take<float>(T);
    replay_args_ = c.take<ReplayArgs>(1);
    emb_sum_ = c.act(T * H);
    emb_mean_ = c.take<float>(T);
    emb_rstd_ = c.take<float>(T);
    emb_ln_ = c.act(T * H);
    hidden0_ = c.act(T * H);
    acts_.assign(config.num_hidden_layers, LayerActs{});
    const int64_t probs = ops_.attention_saved_elems(B, S, static_cast<int>(A));
    Act shared_probs = limits.recompute_attention ? c.act(probs) : nullptr;
    Act shared_inter = limits.recompute_gelu ? c.act(T * I) : nullptr;
    // Inference keeps two layers' activations: layer l reads layer l-1's output and writes its own.
    const size_t kept = limits.inference ? std::min<size_t>(2, acts_.size()) : acts_.size();
    for (size_t l = kept; l < acts_.size(); ++l) acts_[l] = acts_[l % 2];
    for (size_t l = 0; l < kept; ++l) {
      LayerActs& a = acts_[l];
      a.qkv = c.act(T * 3 * H);
      a.ctx = c.act(T * H);
      a.probs = limits.recompute_attention ? shared_probs : c.act(probs);
      a.res1 = c.act(T * H);
      a.mean1 = c.take<float>(T);
      a.rstd1 = c.take<float>(T);
      a.h1 = c.act(T * H);
      a.pre = c.act(T * I);
      a.inter = limits.recompute_gelu ? shared_inter : c.act(T * I);
      a.res2 = c.act(T * H);
      a.mean2 = c.take<float>(T);
      a.rstd2 = c.take<float>(T);
      a.out = c.act(T * H);
    }
    for (size_t l = kept; l < acts_.size(); ++l) acts_[l] = acts_[l % 2];
    scratch_th_ = c.act(T * H);
    cls_h_ = c.act(B * H);
    pool_pre_ = c.act(B * H);
    pooled_ = c.act(B * H);
    nsp_logits_ = c.act(B * 2);
    mlm_h_ = c.act(Nm * H);
    mlm_pre_ = c.act(Nm * H);
    mlm_act_ = c.act(NmB * H);
    mlm_mean_ = c.take<float>(Nm);
    mlm_rstd_ = c.take<float>(Nm);
    mlm_ln_ = c.act(Nm * H);
    logits_ = c.act(Nm * Vp);
    losses_ = c.take<float>(R);
    correct_ = c.take<int32_t>(R);
    head_logits_ = c.act(head_logits);
    head_labels_ = c.take<int32_t>(R);
    g0_ = c.act(train * T * H);
    g1_ = c.act(train * T * H);
    g2_ = c.act(train * T * H);
    gqkv_ = c.act(train * T * 3 * H);
    gi0_ = c.act(train * T * I);
    gi1_ = c.act(train * T * I);
    g_cls_ = c.act(train * B * H);
    g_pooled_ = c.act(train * B * H);
    g_pool_pre_ = c.act(train * B * H);
    g_mlm_h_ = c.act(train * Nm * H);
    g_mlm_ln_ = c.act(train * Nm * H);
    g_mlm_act_ = c.act(train * NmB * H);
  };
  Carver measure(nullptr, ops_.activation_type());
  carve(measure);
  arena_bytes_ = measure.used();
  try {
    arena_ = ops_.alloc(arena_bytes_);
  } catch (...) {
    ops_.release(params_);
    if (grads_) ops_.release(grads_);
    throw;
  }
  Carver real(static_cast<char*>(arena_), ops_.activation_type());
  carve(real);
}

BertModel::~BertModel() {
  ops_.release(arena_);
  if (grads_) ops_.release(grads_);
  ops_.release(params_);
}

void BertModel::init_weights(uint64_t seed) {
  if (!ops_.holds_values()) return;  // the cost model: a BERT-large plan skips 336M draws
  std::vector<float> host(table_.total_elems, 0.0f);
  const float stddev = config_.initializer_range;
  for (size_t t = 0; t < table_.entries.size(); ++t) {
    const ParamEntry& e = table_.entries[t];
    float* dst = host.data() + e.offset;
    const int64_t n = e.elems();  // padded vocabulary rows stay zero
    for (int64_t i = 0; i < n; ++i) {
      if (e.init == ParamInit::ones) {
        dst[i] = 1.0f;
      } else if (e.init == ParamInit::normal) {
        // Box-Muller on two Philox uniforms of stream (seed, 0, tensor t).
        Philox4 r = philox_block(seed, 0, static_cast<uint32_t>(t), static_cast<uint64_t>(i));
        const float u1 = (static_cast<float>(r.v[0] >> 8) + 1.0f) * (1.0f / 16777217.0f);
        const float u2 = philox_uniform(r.v[1]);
        dst[i] = stddev * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
      }
    }
  }
  ops_.upload(params_, host.data(), host.size() * sizeof(float));
  ops_.weights_changed();
}

void BertModel::zero_grads() {
  if (grads_) ops_.fill_zero(grads_, table_.total_elems * sizeof(float));
}

int64_t BertModel::output_elems(ModelOutput what, int B, int S) const {
  const int64_t H = config_.hidden_size, NL = task_.num_labels;
  const auto product = [&](std::initializer_list<int64_t> factors) {
    int64_t n = 1;
    for (int64_t f : factors) {
      BERT_CHECK(!__builtin_mul_overflow(n, f, &n), Code::invalid_argument, "an output of batch_size ", B,
                 " x seq_length ", S, " overflows the element count");
    }
    return n;
  };
  switch (what) {
    case ModelOutput::hidden:
      return product({B, S, H});
    case ModelOutput::pooled:
      BERT_CHECK(task_.has_pooler(), Code::invalid_argument, "a ", task_.name(),
                 " model has no pooler (Hugging Face builds ", task_.hf_architecture(),
                 " without one): ask for the logits or the hidden states");
      return product({B, H});
    case ModelOutput::logits:
      switch (task_.type) {
        case TaskType::pretraining: return product({B, 2});
        case TaskType::sequence_classification: return product({B, NL});
        case TaskType::token_classification: return product({B, S, NL});
        case TaskType::question_answering: return product({B, 2, S});
      }
  }
  return 0;
}

void BertModel::download_act(float* host, ConstAct src, int64_t n) const {
  if (src.type == DType::f32) return ops_.download(host, src.data, n * sizeof(float));
  std::vector<uint16_t> bits(n);
  ops_.download(bits.data(), src.data, n * sizeof(uint16_t));
  for (int64_t i = 0; i < n; ++i) host[i] = src.type == DType::bf16 ? bf16_bits_to_float(bits[i]) : fp16_bits_to_float(bits[i]);
}

void BertModel::upload_act(Act dst, const float* host, int64_t n) const {
  if (dst.type == DType::f32) return ops_.upload(dst.data, host, n * sizeof(float));
  std::vector<uint16_t> bits(n);
  for (int64_t i = 0; i < n; ++i) bits[i] = dst.type == DType::bf16 ? float_to_bf16_bits(host[i]) : float_to_fp16_bits(host[i]);
  ops_.upload(dst.data, bits.data(), n * sizeof(uint16_t));
}

void BertModel::copy_out_tokens(float* host, ConstAct rows, const ModelInputs& in, int width) const {
  const int B = in.batch_size(), S = in.seq_length;
  std::vector<float> all(static_cast<size_t>(in.tokens()) * width);
  download_act(all.data(), rows, static_cast<int64_t>(all.size()));
  std::fill(host, host + static_cast<int64_t>(B) * S * width, 0.0f);
  for (int b = 0; b < B; ++b) {
    const int64_t first = in.layout.seq_start[b];
    for (int64_t r = first; r < in.layout.seq_start[b + 1]; ++r) {
      if (in.key_bias[r] != 0.0f) continue;  // a padding position
      std::copy(all.begin() + r * width, all.begin() + (r + 1) * width, host + (int64_t{b} * S + (r - first)) * width);
    }
  }
}

void BertModel::upload_inputs(const ModelInputs& in) {
  const int64_t T = in.tokens();
  const int B = in.batch_size();
  BERT_CHECK(T <= static_cast<int64_t>(limits_.max_batch) * limits_.max_seq_length && B <= limits_.max_batch,
             Code::internal, "micro-batch exceeds the activation arena");
  ops_.upload(word_ids_, in.word_ids.data(), T * sizeof(int32_t));
  ops_.upload(pos_ids_, in.pos_ids.data(), T * sizeof(int32_t));
  ops_.upload(type_ids_, in.type_ids.data(), T * sizeof(int32_t));
  ops_.upload(key_bias_, in.key_bias.data(), T * sizeof(float));
  ops_.upload(cls_rows_, in.cls_rows.data(), B * sizeof(int32_t));
  ops_.upload(nsp_labels_, in.nsp_labels.data(), B * sizeof(int32_t));
  if (!in.task_labels.empty()) {
    ops_.upload(head_labels_, in.task_labels.data(), in.task_labels.size() * sizeof(int32_t));
  }
  if (!in.mlm_rows.empty()) {
    ops_.upload(mlm_rows_, in.mlm_rows.data(), in.mlm_rows.size() * sizeof(int32_t));
    ops_.upload(mlm_labels_, in.mlm_labels.data(), in.mlm_labels.size() * sizeof(int32_t));
  }
}

DropoutSite BertModel::site(const DropoutStream& d, uint32_t tensor_id, float p) const {
  DropoutSite s;
  s.seed = d.seed;
  s.step = d.step;
  s.step_at = replay_at_ != nullptr ? &replay_at_->dropout_step : nullptr;
  s.tensor_id = tensor_id;
  s.p = d.enabled ? p : 0.0f;
  return s;
}

void BertModel::check_abort(const std::atomic<bool>* abort) const {
  if (abort && abort->load(std::memory_order_relaxed)) fail(Code::aborted, "the call was aborted");
}

ForwardStats BertModel::run(const ModelInputs& in, const DropoutStream& drop, const BackwardOptions* backward,
                            const std::atomic<bool>* abort, const OutputRequest* output) {
  BERT_CHECK(!(backward && limits_.inference), Code::internal, "backward pass on an inference model");
  BERT_CHECK(!backward || in.has_labels, Code::internal, "backward pass without labels");
  const bool recorded = backward && backward->recorded;
  upload_inputs(in);
  ForwardStats stats;
  if (recorded) {
    compute_recorded(in, drop, *backward, abort);
  } else {
    stats = compute(in, drop, backward, abort, output);
  }
  if (task_.pretraining() && in.has_labels) {
    stats = pretraining_losses(in.batch_size(), static_cast<int64_t>(in.mlm_rows.size()), in.mlm_labelled);
  }
  return stats;
}

void BertModel::compute_recorded(const ModelInputs& in, const DropoutStream& drop, const BackwardOptions& backward,
                                 const std::atomic<bool>* abort) {
  BERT_CHECK(task_.pretraining() && in.layout.uniform_length() > 0, Code::internal,
             "recorded forward and backward need pretraining on padded batches");
  BERT_CHECK(in.mlm_rows.size() == static_cast<size_t>(in.batch_size()) * limits_.max_predictions, Code::internal,
             "recorded forward and backward need fixed MLM rows (Padding::fixed_mlm_rows): ", in.mlm_rows.size(),
             " rows for ", in.batch_size(), " sequences of ", limits_.max_predictions);
  check_abort(abort);
  const int64_t masked = in.mlm_labelled;
  const ReplayArgs args{drop.step, masked > 0 ? backward.loss_scale / masked : 0.0f};
  ops_.upload(replay_args_, &args, sizeof args);
  ops_.refresh_weights();
  replay_at_ = replay_args_;
  struct ClearReplayAt {
    const ReplayArgs*& at;
    ~ClearReplayAt() { at = nullptr; }
  } clear{replay_at_};
  auto body = [&] { compute(in, drop, &backward, nullptr, nullptr); };
  const RecordingKey key{in.batch_size(), in.tokens(), backward.loss_scale, drop.enabled, drop.seed,
                         backward.on_grads_ready != nullptr};
  // A new (fp16 dynamic) loss scale retires the recordings made with the old one.
  std::erase_if(recordings_, [&](const auto& entry) { return entry.first.loss_scale != key.loss_scale; });
  const RecordedRun run = run_recorded(ops_, recordings_[key], body);
  if (run == RecordedRun::recorded) ++recording_counts_.recorded;
  if (run != RecordedRun::direct) ++recording_counts_.replayed;
}

ForwardStats BertModel::pretraining_losses(int B, int64_t rows, int64_t masked) const {
  std::vector<float> losses(B + rows);
  std::vector<int32_t> hits(B + rows);
  ops_.download(losses.data(), losses_, losses.size() * sizeof(float));
  ops_.download(hits.data(), correct_, hits.size() * sizeof(int32_t));
  ForwardStats stats;
  for (int i = 0; i < B; ++i) {
    stats.nsp_loss_sum += losses[i];
    stats.nsp_correct += hits[i];
  }
  for (int64_t i = B; i < B + rows; ++i) {  // unlabelled rows have loss 0 and no hit
    stats.mlm_loss_sum += losses[i];
    stats.mlm_correct += hits[i];
  }
  stats.nsp_count = B;
  stats.mlm_count = masked;
  return stats;
}

DropoutSite BertModel::embedding_dropout(const DropoutStream& d) const {
  return site(d, 0, config_.hidden_dropout_prob);
}

DropoutSite BertModel::layer_dropout(const DropoutStream& d, int layer, LayerDropout which) const {
  const float p = which == LayerDropout::attention_probs ? config_.attention_probs_dropout_prob
                                                         : config_.hidden_dropout_prob;
  return site(d, 4 * static_cast<uint32_t>(layer) + static_cast<uint32_t>(which), p);
}

DropoutSite BertModel::head_dropout(const DropoutStream& d) const {
  return site(d, 4 * static_cast<uint32_t>(config_.num_hidden_layers), config_.hidden_dropout_prob);
}

ForwardStats BertModel::compute(const ModelInputs& in, const DropoutStream& drop, const BackwardOptions* backward,
                                const std::atomic<bool>* abort, const OutputRequest* output) {
  forward_only_ = backward == nullptr;
  embeddings_forward(in, drop);
  // Without labels or gradients the pooler's output and the logits on it need only the last
  // layer's [CLS] rows.
  const bool cls_only = output && !backward && !in.has_labels && task_.has_pooler() &&
                        output->what != ModelOutput::hidden;
  const ConstAct h = encoder_forward(in, drop, abort, cls_only);
  if (output && output->what == ModelOutput::hidden) copy_out_tokens(output->host, h, in, config_.hidden_size);
  const float loss_scale = backward ? backward->loss_scale : 1.0f;
  const ForwardStats stats = head(in, h, drop, backward != nullptr, loss_scale, output);
  if (!backward) return stats;
  auto grads_ready = [&](int64_t offset) {
    if (backward->on_grads_ready) backward->on_grads_ready(offset);
  };
  // The heads' gradients are final (the tied decoder's word_emb also takes the embeddings').
  grads_ready(task_.has_pooler() ? table_.pooler_w : table_.head_w);
  const ConstAct dh = encoder_backward(in, drop, abort, grads_ready);
  embeddings_backward(in, drop, dh);
  grads_ready(0);
  return stats;
}

ForwardStats BertModel::head(const ModelInputs& in, ConstAct h, const DropoutStream& drop, bool backward,
                             float loss_scale, const OutputRequest* output) {
  switch (task_.type) {
    case TaskType::pretraining: return pretraining_head(in, h, backward, loss_scale, output);
    case TaskType::sequence_classification: return sequence_head(in, h, drop, backward, loss_scale, output);
    case TaskType::token_classification: return token_head(in, h, drop, backward, loss_scale, output);
    case TaskType::question_answering: return qa_head(in, h, backward, loss_scale, output);
  }
  fail(Code::internal, "unknown task type");
}

void BertModel::embeddings_forward(const ModelInputs& in, const DropoutStream& drop) {
  const ParamTable& P = table_;
  const float* W = params_;
  const int64_t T = in.tokens();
  const int H = config_.hidden_size;
  ops_.embedding_fwd({emb_sum_, word_ids_, pos_ids_, type_ids_, W + P.word_emb, W + P.pos_emb, W + P.type_emb, T, H});
  ops_.layernorm_fwd({emb_ln_, emb_mean_, emb_rstd_, emb_sum_, W + P.emb_ln_g, W + P.emb_ln_b, T, H,
                      config_.layer_norm_eps});
  ops_.dropout_residual_fwd({hidden0_, emb_ln_, nullptr, T * H, embedding_dropout(drop)});
}

ConstAct BertModel::encoder_forward(const ModelInputs& in, const DropoutStream& drop, const std::atomic<bool>* abort,
                                    bool cls_only) {
  const BertConfig& c = config_;
  const float* W = params_;
  const int64_t T = in.tokens();
  const int H = c.hidden_size, A = c.num_attention_heads, D = c.head_dim();
  ConstAct h = hidden0_;  // [T,H] input of the current layer
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    check_abort(abort);
    const LayerParams& L = table_.layers[l];
    LayerActs& a = acts_[l];
    ops_.linear_fwd({a.qkv, nullptr, h, W + L.qkv_w, W + L.qkv_b, T, H, 3 * H, Activation::none, forward_only_});
    ops_.attention_fwd({a.ctx, a.probs, a.qkv, key_bias_, in.layout, A, D,
                        layer_dropout(drop, l, LayerDropout::attention_probs)});
    if (cls_only && l == c.num_hidden_layers - 1) {
      // Only the [CLS] rows go on: those of the attention output and of the layer input, gathered
      // into the first B rows of the layer's h1 and out (free until layer_after_attention writes them).
      const int64_t B = in.batch_size();
      ops_.gather_rows({a.h1, a.ctx, cls_rows_, B, H});
      ops_.gather_rows({a.out, h, cls_rows_, B, H});
      layer_after_attention(drop, l, a.h1, a.out, B, cls_h_);
      return cls_h_;
    }
    layer_after_attention(drop, l, a.ctx, h, T, a.out);
    h = a.out;
  }
  check_abort(abort);
  return h;
}

// Layer l after its attention on M rows: the attention output dense layer on ctx, the residual
// with the layer input h_in and its LayerNorm (into the layer's h1), the feed-forward, and the
// second residual and LayerNorm into out. ctx may be h1 and h_in the layer's out: each is read
// before that buffer is written.
void BertModel::layer_after_attention(const DropoutStream& drop, int l, ConstAct ctx, ConstAct h_in, int64_t M,
                                      Act out) {
  const BertConfig& c = config_;
  const float* W = params_;
  const int H = c.hidden_size, I = c.intermediate_size;
  const float eps = c.layer_norm_eps;
  const LayerParams& L = table_.layers[l];
  LayerActs& a = acts_[l];
  ops_.linear_fwd({scratch_th_, nullptr, ctx, W + L.attn_out_w, W + L.attn_out_b, M, H, H,
                   Activation::none, forward_only_});
  ops_.residual_layernorm_fwd({a.h1, a.res1, a.mean1, a.rstd1, scratch_th_, h_in, W + L.attn_ln_g, W + L.attn_ln_b, M,
                               H, eps, layer_dropout(drop, l, LayerDropout::attention_output)});
  ops_.linear_fwd({a.inter, a.pre, a.h1, W + L.inter_w, W + L.inter_b, M, H, I, c.activation(), forward_only_});
  ops_.linear_fwd({scratch_th_, nullptr, a.inter, W + L.out_w, W + L.out_b, M, I, H, Activation::none, forward_only_});
  ops_.residual_layernorm_fwd({out, a.res2, a.mean2, a.rstd2, scratch_th_, a.h1, W + L.out_ln_g, W + L.out_ln_b, M, H,
                               eps, layer_dropout(drop, l, LayerDropout::ffn_output)});
}

void BertModel::gather_cls(ConstAct h, int B) {
  if (h.data != cls_h_.data) ops_.gather_rows({cls_h_, h, cls_rows_, B, config_.hidden_size});
}

// dh = gradient w.r.t. the layer output on entry and w.r.t. the layer input on exit; each layer
// builds its input gradient in dh_next (first the residual path, then += the QKV path).
ConstAct BertModel::encoder_backward(const ModelInputs& in, const DropoutStream& drop, const std::atomic<bool>* abort,
                                     const std::function<void(int64_t)>& grads_ready) {
  const BertConfig& c = config_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens();
  const int H = c.hidden_size, I = c.intermediate_size, A = c.num_attention_heads, D = c.head_dim();
  const Activation act = c.activation();
  Act dh = g0_;  // the head's gradient on entry
  Act dh_next = g1_;
  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    check_abort(abort);
    const LayerParams& L = table_.layers[l];
    LayerActs& a = acts_[l];
    ConstAct h_in = l == 0 ? hidden0_ : acts_[l - 1].out;
    // out = LN(res2), res2 = dropout(out_dense) + h1: g2_ = d out_dense, dh = d h1 (residual path)
    ops_.residual_layernorm_bwd({g2_, dh, G + L.out_ln_g, G + L.out_ln_b, dh, a.res2, a.mean2, a.rstd2, W + L.out_ln_g,
                                 T, H, layer_dropout(drop, l, LayerDropout::ffn_output)});
    if (limits_.recompute_gelu) ops_.activation_fwd({a.inter, a.pre, T * I, act});
    ops_.linear_bwd({gi0_, G + L.out_w, G + L.out_b, g2_, a.inter, W + L.out_w, nullptr, nullptr, T, I, H,
                     Activation::none, false});
    ops_.linear_bwd({dh, G + L.inter_w, G + L.inter_b, gi0_, a.h1, W + L.inter_w, a.pre, gi1_, T, H, I, act, true});
    // h1 = LN(res1), res1 = dropout(attn_dense) + h_in: g2_ = d attn_dense, dh_next = d h_in (residual path)
    ops_.residual_layernorm_bwd({g2_, dh_next, G + L.attn_ln_g, G + L.attn_ln_b, dh, a.res1, a.mean1, a.rstd1,
                                 W + L.attn_ln_g, T, H, layer_dropout(drop, l, LayerDropout::attention_output)});
    ops_.linear_bwd({dh, G + L.attn_out_w, G + L.attn_out_b, g2_, a.ctx, W + L.attn_out_w, nullptr, nullptr, T,
                     H, H, Activation::none, false});
    const DropoutSite attn_site = layer_dropout(drop, l, LayerDropout::attention_probs);
    if (limits_.recompute_attention) {  // the same inputs and dropout site give the same probs
      ops_.attention_fwd({scratch_th_, a.probs, a.qkv, key_bias_, in.layout, A, D, attn_site});
    }
    ops_.attention_bwd({gqkv_, dh, limits_.recompute_attention ? scratch_th_ : a.ctx, a.qkv, a.probs, in.layout, A, D,
                        attn_site});
    ops_.linear_bwd({dh_next, G + L.qkv_w, G + L.qkv_b, gqkv_, h_in, W + L.qkv_w, nullptr, nullptr, T, H, 3 * H,
                     Activation::none, true});
    std::swap(dh, dh_next);
    grads_ready(L.qkv_w);
  }
  return dh;
}

void BertModel::embeddings_backward(const ModelInputs& in, const DropoutStream& drop, ConstAct dh) {
  const ParamTable& P = table_;
  const float* W = params_;
  float* G = grads_;
  const int64_t T = in.tokens();
  const int H = config_.hidden_size;
  const Act d_emb_ln = dh.data == g0_.data ? g1_ : g0_;  // the encoder's other gradient buffer
  ops_.dropout_bwd({d_emb_ln, dh, T * H, embedding_dropout(drop)});
  ops_.layernorm_bwd({g2_, G + P.emb_ln_g, G + P.emb_ln_b, d_emb_ln, emb_sum_, emb_mean_, emb_rstd_, W + P.emb_ln_g, T,
                      H});
  ops_.embedding_bwd({G + P.word_emb, G + P.pos_emb, G + P.type_emb, g2_, word_ids_, pos_ids_, type_ids_, T, H});
  // HF's word embedding has padding_idx = pad_token_id (0): the [PAD] row gets no gradient from
  // the lookup. The per-token heads see padding positions, so their [PAD] row gradient would
  // not be zero; in pretraining it carries the tied decoder's gradient and is kept.
  if (!task_.pretraining()) ops_.fill_zero(G + P.word_emb, H * sizeof(float));
}

BertModel::CrossEntropy BertModel::cross_entropy(Act logits, const int32_t* labels, const int32_t* host_labels,
                                                 int64_t M, int V, float scale, std::vector<int32_t>& hits) {
  int64_t count = 0;
  for (int64_t i = 0; i < M; ++i) count += host_labels[i] >= 0;
  ops_.softmax_xent({logits, losses_, correct_, logits, labels, M, V, V, count ? scale / count : 0.0f});
  std::vector<float> losses(M);
  hits.assign(M, 0);
  ops_.download(losses.data(), losses_, M * sizeof(float));
  ops_.download(hits.data(), correct_, M * sizeof(int32_t));
  double sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < M; ++i) {
    if (host_labels[i] < 0) continue;
    sum += losses[i];
    correct += hits[i];
  }
  return CrossEntropy{count ? sum / count : 0.0, count, correct};
}

}  // namespace bert
