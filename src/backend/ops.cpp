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

void Ops::embedding_fwd(const EmbeddingFwdArgs& a) {
  check_rows_shape("embedding_fwd", a.T, a.H);
  check_types("embedding_fwd", activation_type(), {{"out", a.out}});
  observed("embedding_fwd", [&] { embedding_fwd_impl(a); });
}

void Ops::embedding_bwd(const EmbeddingBwdArgs& a) {
  check_rows_shape("embedding_bwd", a.T, a.H);
  check_types("embedding_bwd", activation_type(), {{"dout", a.dout}});
  observed("embedding_bwd", [&] { embedding_bwd_impl(a); });
}

void Ops::linear_fwd(const LinearFwdArgs& a) {
  check_linear_shape("linear_fwd", a.M, a.K, a.N);
  BERT_CHECK(a.act == Activation::none || a.pre_act.data != nullptr, Code::invalid_argument,
             "linear_fwd: an activation needs a pre_act buffer");
  check_types("linear_fwd", activation_type(), {{"out", a.out}, {"pre_act", a.pre_act}, {"in", a.in}});
  observed(a.act == Activation::none ? "linear_fwd" : "linear_fwd+activation", [&] { linear_fwd_impl(a); });
}

void Ops::linear_bwd(const LinearBwdArgs& a) {
  check_linear_shape("linear_bwd", a.M, a.K, a.N);
  BERT_CHECK(a.act == Activation::none || (a.pre_act.data != nullptr && a.dpre_scratch.data != nullptr), Code::invalid_argument,
             "linear_bwd: an activation needs pre_act and dpre_scratch");
  check_types("linear_bwd", activation_type(), {{"din", a.din}, {"dout", a.dout}, {"in", a.in}, {"pre_act", a.pre_act}, {"dpre_scratch", a.dpre_scratch}});
  observed(a.act == Activation::none ? "linear_bwd" : "linear_bwd+activation", [&] { linear_bwd_impl(a); });
}

void Ops::activation_fwd(const ActivationFwdArgs& a) {
  check_element_count("activation_fwd", a.n);
  check_types("activation_fwd", activation_type(), {{"out", a.out}, {"pre", a.pre}});
  observed("activation_fwd", [&] { activation_fwd_impl(a); });
}

void Ops::layernorm_fwd(const LayernormFwdArgs& a) {
  check_rows_shape("layernorm_fwd", a.M, a.N);
  BERT_CHECK(a.eps >= 0.0f, Code::invalid_argument, "layernorm_fwd: eps ", a.eps, " is negative");
  check_types("layernorm_fwd", activation_type(), {{"out", a.out}, {"in", a.in}});
  observed("layernorm_fwd", [&] { layernorm_fwd_impl(a); });
}

void Ops::layernorm_bwd(const LayernormBwdArgs& a) {
  check_rows_shape("layernorm_bwd", a.M, a.N);
  check_types("layernorm_bwd", activation_type(), {{"din", a.din}, {"dout", a.dout}, {"in", a.in}});
  observed("layernorm_bwd", [&] { layernorm_bwd_impl(a); });
}

void Ops::dropout_residual_fwd(const DropoutResidualFwdArgs& a) {
  check_element_count("dropout_residual_fwd", a.n);
  check_dropout_site("dropout_residual_fwd", a.site);
  check_types("dropout_residual_fwd", activation_type(), {{"out", a.out}, {"in", a.in}, {"residual", a.residual}});
  observed("dropout_residual_fwd", [&] { dropout_residual_fwd_impl(a); });
}

void Ops::dropout_bwd(const DropoutBwdArgs& a) {
  check_element_count("dropout_bwd", a.n);
  check_dropout_site("dropout_bwd", a.site);
  check_types("dropout_bwd", activation_type(), {{"din", a.din}, {"dout", a.dout}});
  observed("dropout_bwd", [&] { dropout_bwd_impl(a); });
}

void Ops::residual_layernorm_fwd(const ResidualLayernormFwdArgs& a) {
  check_rows_shape("residual_layernorm_fwd", a.M, a.N);
  BERT_CHECK(a.eps >= 0.0f, Code::invalid_argument, "residual_layernorm_fwd: eps ", a.eps, " is negative");
  check_dropout_site("residual_layernorm_fwd", a.site);
  check_types("residual_layernorm_fwd", activation_type(), {{"out", a.out}, {"res", a.res}, {"in", a.in}, {"residual", a.residual}});
  observed("residual_layernorm_fwd", [&] { residual_layernorm_fwd_impl(a); });
}

void Ops::residual_layernorm_bwd(const ResidualLayernormBwdArgs& a) {
  check_rows_shape("residual_layernorm_bwd", a.M, a.N);
  check_dropout_site("residual_layernorm_bwd", a.site);
  BERT_CHECK(a.M == 0 || (a.d_in.data != a.d_residual.data && a.d_in.data != a.dout.data), Code::invalid_argument,
             "residual_layernorm_bwd: d_in may not alias d_residual or dout");
  check_types("residual_layernorm_bwd", activation_type(), {{"d_in", a.d_in}, {"d_residual", a.d_residual}, {"dout", a.dout}, {"res", a.res}});
  observed("residual_layernorm_bwd", [&] { residual_layernorm_bwd_impl(a); });
}

void Ops::attention_fwd(const AttentionFwdArgs& a) {
  check_attention_args("attention_fwd", a.layout, a.heads, a.head_dim, a.site);
  check_types("attention_fwd", activation_type(), {{"ctx", a.ctx}, {"probs", a.probs}, {"qkv", a.qkv}});
  observed("attention_fwd", [&] { attention_fwd_impl(a); });
}

void Ops::attention_bwd(const AttentionBwdArgs& a) {
  check_attention_args("attention_bwd", a.layout, a.heads, a.head_dim, a.site);
  check_types("attention_bwd", activation_type(), {{"dqkv", a.dqkv}, {"dctx", a.dctx}, {"ctx", a.ctx}, {"qkv", a.qkv}, {"probs", a.probs}});
  observed("attention_bwd", [&] { attention_bwd_impl(a); });
}

void Ops::gather_rows(const GatherRowsArgs& a) {
  check_rows_shape("gather_rows", a.n, a.H);
  check_types("gather_rows", activation_type(), {{"out", a.out}, {"in", a.in}});
  observed("gather_rows", [&] { gather_rows_impl(a); });
}

void Ops::scatter_add_rows(const ScatterAddRowsArgs& a) {
  check_rows_shape("scatter_add_rows", a.n, a.H);
  check_types("scatter_add_rows", activation_type(), {{"dst", a.dst}, {"src", a.src}});
  observed("scatter_add_rows", [&] { scatter_add_rows_impl(a); });
}

void Ops::softmax_xent(const SoftmaxXentArgs& a) {
  BERT_CHECK(a.M >= 0 && a.V > 0 && a.ld >= a.V, Code::invalid_argument, "softmax_xent: bad shape M=", a.M, " V=", a.V, " ld=", a.ld);
  check_types("softmax_xent", activation_type(), {{"dlogits", a.dlogits}, {"logits", a.logits}});
  observed("softmax_xent", [&] { softmax_xent_impl(a); });
}

void Ops::segment_sumsq(const SegmentSumsqArgs& a) {
  check_segments("segment_sumsq", a.segs);
  observed("segment_sumsq", [&] { segment_sumsq_impl(a); });
}

void Ops::adam_direction(const AdamDirectionArgs& a) {
  check_segments("adam_direction", a.segs);
  observed("adam_direction", [&] { adam_direction_impl(a); });
}

void Ops::apply_update(const ApplyUpdateArgs& a) {
  check_segments("apply_update", a.segs);
  BERT_CHECK(a.host_scale.size() == a.segs.size(), Code::invalid_argument, "apply_update: ", a.host_scale.size(),
             " scales for ", a.segs.size(), " segments");
  observed("apply_update", [&] { apply_update_impl(a); });
}

void Ops::optimizer_step(const OptimizerStepArgs& a) {
  check_segments("optimizer_step", a.segs);
  BERT_CHECK(a.state != nullptr, Code::invalid_argument, "optimizer_step: no state");
  observed("optimizer_step", [&] { optimizer_step_impl(a); });
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
