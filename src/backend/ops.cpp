// The public Ops methods: each checks its arguments once, for every backend, with the same
// messages, then calls the backend's implementation (the *_impl methods), which starts at the
// math, telling the observers before and after. Only shapes and scalars are checked here;
// buffer sizes are the caller's contract. Also run_recorded, the life of a recording.
#include "backend/ops.h"

#include <algorithm>
#include <initializer_list>

#include "core/error.h"

namespace bert {
namespace {

void check_linear_shape(const char* op, int64_t M, int K, int N) {
  BERT_CHECK(M >= 0 && K > 0 && N > 0, Code::invalid_argument, op, ": bad shape M=", M, " K=", K, " N=", N);
}

void check_element_count(const char* op, int64_t n) {
  BERT_CHECK(n >= 0, Code::invalid_argument, op, ": bad element count ", n);
}

void check_rows_shape(const char* op, int64_t n, int H) {
  BERT_CHECK(n >= 0 && H > 0, Code::invalid_argument, op, ": bad shape rows=", n, " H=", H);
}

// Parameter segments of the optimizer ops: offsets and sizes not negative.
void check_segments(const char* op, const std::vector<ParamSegment>& segs) {
  for (size_t s = 0; s < segs.size(); ++s) {
    BERT_CHECK(segs[s].offset >= 0 && segs[s].size >= 0, Code::invalid_argument, op, ": segment ", s, " has offset ",
               segs[s].offset, " and size ", segs[s].size);
  }
}

// Rejects probabilities outside [0, 1).
void check_dropout_site(const char* op, const DropoutSite& site) {
  BERT_CHECK(site.p >= 0.0f && site.p < 1.0f, Code::invalid_argument, op, ": dropout probability ", site.p,
             " (tensor id ", site.tensor_id, ") is outside [0, 1)");
}

// Heads, head size, a layout starting at 0 with non-decreasing offsets, and the dropout site.
void check_attention_args(const char* op, const AttentionLayout& layout, int heads, int head_dim,
                          const DropoutSite& site) {
  BERT_CHECK(heads > 0 && head_dim > 0, Code::invalid_argument, op, ": bad heads=", heads, " head_dim=", head_dim);
  BERT_CHECK(layout.num_seqs() >= 1 && layout.seq_start[0] == 0, Code::invalid_argument, op,
             ": layout needs seq_start = {0, ...} with at least one sequence");
  for (int b = 0; b < layout.num_seqs(); ++b) {
    BERT_CHECK(layout.seq_start[b + 1] >= layout.seq_start[b], Code::invalid_argument, op, ": seq_start[", b + 1,
               "] = ", layout.seq_start[b + 1], " is below seq_start[", b, "] = ", layout.seq_start[b]);
  }
  check_dropout_site(op, site);
}

// Every activation view an op is given is stored in the backend's activation type (a caller
// passing another type is a bug in the engine, not bad input).
struct NamedAct {
  const char* name;
  ConstAct act;
};
void check_types(const char* op, DType expected, std::initializer_list<NamedAct> acts) {
  for (const NamedAct& a : acts) {
    BERT_CHECK(a.act.data == nullptr || a.act.type == expected, Code::internal, op, ": ", a.name, " is ",
               dtype_name(a.act.type), " but this backend stores activations in ", dtype_name(expected));
  }
}

}  // namespace

void Ops::add_observer(OpObserver* observer) { observers_.push_back(observer); }

void Ops::remove_observer(OpObserver* observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

void Ops::notify(bool before, const char* op) {
  for (OpObserver* o : observers_) before ? o->before(*this, op) : o->after(*this, op);
}

void* Ops::alloc(size_t bytes) {
  void* ptr = nullptr;
  observed("alloc", [&] { ptr = alloc_impl(bytes); });
  return ptr;
}

void Ops::release(void* ptr) {
  observed("release", [&] { release_impl(ptr); });
}

void Ops::upload(void* dst, const void* host_src, size_t bytes) {
  observed("upload", [&] { upload_impl(dst, host_src, bytes); });
}

void Ops::download(void* host_dst, const void* src, size_t bytes) {
  observed("download", [&] { download_impl(host_dst, src, bytes); });
}

void Ops::copy(void* dst, const void* src, size_t bytes) {
  observed("copy", [&] { copy_impl(dst, src, bytes); });
}

void Ops::fill_zero(void* dst, size_t bytes) {
  observed("fill_zero", [&] { fill_zero_impl(dst, bytes); });
}

void Ops::synchronize() {
  observed("synchronize", [&] { synchronize_impl(); });
}

void Ops::embedding_fwd(Act out, const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                        const float* word_emb, const float* pos_emb, const float* type_emb, int64_t T, int H) {
  check_rows_shape("embedding_fwd", T, H);
  check_types("embedding_fwd", activation_type(), {{"out", out}});
  observed("embedding_fwd", [&] { embedding_fwd_impl(out, word_ids, pos_ids, type_ids, word_emb, pos_emb, type_emb, T, H); });
}

void Ops::embedding_bwd(float* dword, float* dpos, float* dtype, ConstAct dout, const int32_t* word_ids,
                        const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H) {
  check_rows_shape("embedding_bwd", T, H);
  check_types("embedding_bwd", activation_type(), {{"dout", dout}});
  observed("embedding_bwd", [&] { embedding_bwd_impl(dword, dpos, dtype, dout, word_ids, pos_ids, type_ids, T, H); });
}

void Ops::linear_fwd(Act out, Act pre_act, ConstAct in, const float* W, const float* b, int64_t M, int K,
                     int N, Activation act) {
  check_linear_shape("linear_fwd", M, K, N);
  BERT_CHECK(act == Activation::none || pre_act.data != nullptr, Code::invalid_argument,
             "linear_fwd: an activation needs a pre_act buffer");
  check_types("linear_fwd", activation_type(), {{"out", out}, {"pre_act", pre_act}, {"in", in}});
  observed(act == Activation::none ? "linear_fwd" : "linear_fwd+activation", [&] { linear_fwd_impl(out, pre_act, in, W, b, M, K, N, act); });
}

void Ops::linear_bwd(Act din, float* dW, float* db, ConstAct dout, ConstAct in, const float* W,
                     ConstAct pre_act, Act dpre_scratch, int64_t M, int K, int N, Activation act,
                     bool accumulate_din) {
  check_linear_shape("linear_bwd", M, K, N);
  BERT_CHECK(act == Activation::none || (pre_act.data != nullptr && dpre_scratch.data != nullptr), Code::invalid_argument,
             "linear_bwd: an activation needs pre_act and dpre_scratch");
  check_types("linear_bwd", activation_type(), {{"din", din}, {"dout", dout}, {"in", in}, {"pre_act", pre_act}, {"dpre_scratch", dpre_scratch}});
  observed(act == Activation::none ? "linear_bwd" : "linear_bwd+activation", [&] { linear_bwd_impl(din, dW, db, dout, in, W, pre_act, dpre_scratch, M, K, N, act, accumulate_din); });
}

void Ops::activation_fwd(Act out, ConstAct pre, int64_t n, Activation act) {
  check_element_count("activation_fwd", n);
  check_types("activation_fwd", activation_type(), {{"out", out}, {"pre", pre}});
  observed("activation_fwd", [&] { activation_fwd_impl(out, pre, n, act); });
}

void Ops::layernorm_fwd(Act out, float* mean, float* rstd, ConstAct in, const float* gamma, const float* beta,
                        int64_t M, int N, float eps) {
  check_rows_shape("layernorm_fwd", M, N);
  BERT_CHECK(eps >= 0.0f, Code::invalid_argument, "layernorm_fwd: eps ", eps, " is negative");
  check_types("layernorm_fwd", activation_type(), {{"out", out}, {"in", in}});
  observed("layernorm_fwd", [&] { layernorm_fwd_impl(out, mean, rstd, in, gamma, beta, M, N, eps); });
}

void Ops::layernorm_bwd(Act din, float* dgamma, float* dbeta, ConstAct dout, ConstAct in,
                        const float* mean, const float* rstd, const float* gamma, int64_t M, int N) {
  check_rows_shape("layernorm_bwd", M, N);
  check_types("layernorm_bwd", activation_type(), {{"din", din}, {"dout", dout}, {"in", in}});
  observed("layernorm_bwd", [&] { layernorm_bwd_impl(din, dgamma, dbeta, dout, in, mean, rstd, gamma, M, N); });
}

void Ops::dropout_residual_fwd(Act out, ConstAct in, ConstAct residual, int64_t n,
                               const DropoutSite& site) {
  check_element_count("dropout_residual_fwd", n);
  check_dropout_site("dropout_residual_fwd", site);
  check_types("dropout_residual_fwd", activation_type(), {{"out", out}, {"in", in}, {"residual", residual}});
  observed("dropout_residual_fwd", [&] { dropout_residual_fwd_impl(out, in, residual, n, site); });
}

void Ops::dropout_bwd(Act din, ConstAct dout, int64_t n, const DropoutSite& site) {
  check_element_count("dropout_bwd", n);
  check_dropout_site("dropout_bwd", site);
  check_types("dropout_bwd", activation_type(), {{"din", din}, {"dout", dout}});
  observed("dropout_bwd", [&] { dropout_bwd_impl(din, dout, n, site); });
}

void Ops::residual_layernorm_fwd(Act out, Act res, float* mean, float* rstd, ConstAct in,
                                 ConstAct residual, const float* gamma, const float* beta, int64_t M, int N,
                                 float eps, const DropoutSite& site) {
  check_rows_shape("residual_layernorm_fwd", M, N);
  BERT_CHECK(eps >= 0.0f, Code::invalid_argument, "residual_layernorm_fwd: eps ", eps, " is negative");
  check_dropout_site("residual_layernorm_fwd", site);
  check_types("residual_layernorm_fwd", activation_type(), {{"out", out}, {"res", res}, {"in", in}, {"residual", residual}});
  observed("residual_layernorm_fwd", [&] { residual_layernorm_fwd_impl(out, res, mean, rstd, in, residual, gamma, beta, M, N, eps, site); });
}

void Ops::residual_layernorm_bwd(Act d_in, Act d_residual, float* dgamma, float* dbeta, ConstAct dout,
                                 ConstAct res, const float* mean, const float* rstd, const float* gamma,
                                 int64_t M, int N, const DropoutSite& site) {
  check_rows_shape("residual_layernorm_bwd", M, N);
  check_dropout_site("residual_layernorm_bwd", site);
  BERT_CHECK(M == 0 || (d_in.data != d_residual.data && d_in.data != dout.data), Code::invalid_argument,
             "residual_layernorm_bwd: d_in may not alias d_residual or dout");
  check_types("residual_layernorm_bwd", activation_type(), {{"d_in", d_in}, {"d_residual", d_residual}, {"dout", dout}, {"res", res}});
  observed("residual_layernorm_bwd", [&] { residual_layernorm_bwd_impl(d_in, d_residual, dgamma, dbeta, dout, res, mean, rstd, gamma, M, N, site); });
}

void Ops::attention_fwd(Act ctx, Act probs, ConstAct qkv, const float* key_bias,
                        const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  check_attention_args("attention_fwd", layout, heads, head_dim, site);
  check_types("attention_fwd", activation_type(), {{"ctx", ctx}, {"probs", probs}, {"qkv", qkv}});
  observed("attention_fwd", [&] { attention_fwd_impl(ctx, probs, qkv, key_bias, layout, heads, head_dim, site); });
}

void Ops::attention_bwd(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                        const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  check_attention_args("attention_bwd", layout, heads, head_dim, site);
  check_types("attention_bwd", activation_type(), {{"dqkv", dqkv}, {"dctx", dctx}, {"ctx", ctx}, {"qkv", qkv}, {"probs", probs}});
  observed("attention_bwd", [&] { attention_bwd_impl(dqkv, dctx, ctx, qkv, probs, layout, heads, head_dim, site); });
}

void Ops::gather_rows(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) {
  check_rows_shape("gather_rows", n, H);
  check_types("gather_rows", activation_type(), {{"out", out}, {"in", in}});
  observed("gather_rows", [&] { gather_rows_impl(out, in, rows, n, H); });
}

void Ops::scatter_add_rows(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H) {
  check_rows_shape("scatter_add_rows", n, H);
  check_types("scatter_add_rows", activation_type(), {{"dst", dst}, {"src", src}});
  observed("scatter_add_rows", [&] { scatter_add_rows_impl(dst, src, rows, n, H); });
}

void Ops::softmax_xent(Act dlogits, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels,
                       int64_t M, int V, int ld, ScaleArg grad_scale) {
  BERT_CHECK(M >= 0 && V > 0 && ld >= V, Code::invalid_argument, "softmax_xent: bad shape M=", M, " V=", V, " ld=", ld);
  check_types("softmax_xent", activation_type(), {{"dlogits", dlogits}, {"logits", logits}});
  observed("softmax_xent", [&] { softmax_xent_impl(dlogits, losses, correct, logits, labels, M, V, ld, grad_scale); });
}

void Ops::segment_sumsq(double* host_out, const float* x, const std::vector<ParamSegment>& segs) {
  check_segments("segment_sumsq", segs);
  observed("segment_sumsq", [&] { segment_sumsq_impl(host_out, x, segs); });
}

void Ops::adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                         const std::vector<ParamSegment>& segs, const AdamStepArgs& args, double* host_sumsq) {
  check_segments("adam_direction", segs);
  observed("adam_direction", [&] { adam_direction_impl(update, m, v, grad, param, segs, args, host_sumsq); });
}

void Ops::apply_update(float* param, const float* update, const std::vector<ParamSegment>& segs,
                       const std::vector<float>& host_scale) {
  check_segments("apply_update", segs);
  BERT_CHECK(host_scale.size() == segs.size(), Code::invalid_argument, "apply_update: ", host_scale.size(),
             " scales for ", segs.size(), " segments");
  observed("apply_update", [&] { apply_update_impl(param, update, segs, host_scale); });
}

void Ops::optimizer_step(float* param, float* m, float* v, float* update, const float* grad,
                         const std::vector<ParamSegment>& segs, TrustRatio trust, OptimizerStepState* state) {
  check_segments("optimizer_step", segs);
  BERT_CHECK(state != nullptr, Code::invalid_argument, "optimizer_step: no state");
  observed("optimizer_step", [&] { optimizer_step_impl(param, m, v, update, grad, segs, trust, state); });
}

void Ops::scale(float* x, float a, int64_t n) {
  check_element_count("scale", n);
  observed("scale", [&] { scale_impl(x, a, n); });
}

RecordedRun run_recorded(Ops& ops, RecordingSlot& slot, const std::function<void()>& body) {
  if (slot.work != nullptr) {
    if (slot.work->replay()) return RecordedRun::replayed;
    slot.work.reset();  // the backend's buffers moved since it was recorded: run directly once more
  } else if (slot.seen) {  // ran directly before, so no scratch buffer grows while recording
    slot.work = ops.record(body);
    if (slot.work != nullptr) {
      BERT_CHECK(slot.work->replay(), Code::internal, "work recorded just now could not be replayed");
      return RecordedRun::recorded;
    }
  }
  slot.seen = true;
  body();
  return RecordedRun::direct;
}

}  // namespace bert
