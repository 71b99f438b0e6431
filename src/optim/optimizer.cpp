// Optimizer::step — global-norm clip, then Adam moments with bias correction, decoupled weight
// decay, and LAMB's per-tensor trust ratio (apex multi_tensor_lamb semantics), or SGD's momentum
// buffer — driven from the host, and Optimizer::step_recorded, the Adam-family step as one
// device-resident op run as recorded work.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/optimizer_math.h"

namespace bert {

namespace {
constexpr OptimizerKind kKinds[] = {OptimizerKind::lamb, OptimizerKind::adamw, OptimizerKind::sgd};
}  // namespace

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::lamb: return "lamb";
    case OptimizerKind::adamw: return "adamw";
    case OptimizerKind::sgd: return "sgd";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  for (OptimizerKind kind : kKinds) {
    if (name == optimizer_name(kind)) return kind;
  }
  fail(Code::config, "config key 'train.optimizer' = \"", name, "\" is not one of: lamb, adamw, sgd");
}

std::vector<std::string> optimizer_slot_names(OptimizerKind kind) {
  if (kind == OptimizerKind::sgd) return {"momentum_buffer"};  // torch.optim.SGD's state name
  return {"exp_avg", "exp_avg_sq"};                             // torch.optim.AdamW's
}

Optimizer::Optimizer(const OptimizerConfig& config, const ParamTable& table, Ops& ops, const OptimizerShard& shard)
    : config_(config), ops_(ops), sum_across_shards_(shard.sum_across_shards), begin_(shard.begin) {
  const int64_t end = shard.end < 0 ? table.total_elems : shard.end;
  BERT_CHECK(0 <= begin_ && begin_ <= end && end <= table.total_elems, Code::invalid_argument, "optimizer shard [",
             begin_, ", ", end, ") is not inside the ", table.total_elems, " parameters");
  elems_ = end - begin_;
  const std::vector<ParamSegment> tensors = table.segments(static_cast<float>(config.weight_decay));
  tensors_ = tensors.size();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t lo = std::max(tensors[t].offset, begin_), hi = std::min(tensors[t].offset + tensors[t].size, end);
    if (lo >= hi) continue;
    segs_.push_back({lo - begin_, hi - lo, tensors[t].weight_decay});
    tensor_of_.push_back(t);
  }
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(elems_, 1)) * sizeof(float);
  for (const std::string& name : optimizer_slot_names(config_.kind)) {
    slots_.push_back({name, static_cast<float*>(ops_.alloc(bytes))});
  }
  if (config_.kind != OptimizerKind::sgd) update_ = static_cast<float*>(ops_.alloc(bytes));
  state_ = static_cast<OptimizerStepState*>(ops_.alloc(sizeof(OptimizerStepState)));
  trust_ = config_.kind != OptimizerKind::lamb ? TrustRatio::none : config_.nvlamb ? TrustRatio::all : TrustRatio::decayed;
}

float* Optimizer::slot(const std::string& name) {
  for (const OptimizerSlot& s : slots_) {
    if (s.name == name) return s.data;
  }
  fail(Code::internal, "the ", optimizer_name(config_.kind), " optimizer keeps no slot '", name, "'");
}

std::vector<double> Optimizer::tensor_sums(const float* x) {
  std::vector<double> part(segs_.size());
  ops_.segment_sumsq({part.data(), x, segs_});
  std::vector<double> sums(tensors_, 0.0);
  for (size_t i = 0; i < segs_.size(); ++i) sums[tensor_of_[i]] += part[i];
  return sums;
}

Optimizer::~Optimizer() {
  recording_.work.reset();
  ops_.release(state_);
  if (update_ != nullptr) ops_.release(update_);
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) ops_.release(it->data);
}

OptimizerStepState Optimizer::step_inputs(double lr, double grad_scale) const {
  const int64_t t = steps_ + 1;
  OptimizerStepState st;
  st.grad_scale = grad_scale;
  st.max_grad_norm = config_.max_grad_norm;
  st.lr = lr;
  st.adam.beta1 = static_cast<float>(config_.beta1);
  st.adam.beta2 = static_cast<float>(config_.beta2);
  st.adam.eps = static_cast<float>(config_.eps);
  if (config_.bias_correction) {  // from the same fp32 betas the moment update uses (as apex does)
    st.adam.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(st.adam.beta1), static_cast<double>(t)));
    st.adam.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(st.adam.beta2), static_cast<double>(t)));
  }
  return st;
}

OptimizerResult Optimizer::step(float* all_params, const float* all_grads, double lr, double grad_scale) {
  float* params = all_params + begin_;
  const float* grads = all_grads + begin_;
  OptimizerResult result;
  OptimizerStepState st = step_inputs(lr, grad_scale);
  std::vector<double> sq = tensor_sums(grads);
  if (sum_across_shards_) sum_across_shards_(sq.data(), static_cast<int64_t>(sq.size()));
  derive_step_scalars(st, sq.data(), static_cast<int>(sq.size()));
  result.grad_norm = st.grad_norm;
  if (st.skipped) {
    result.skipped = true;
    return result;
  }
  if (config_.kind == OptimizerKind::sgd) sgd_update(params, grads, st, lr);
  else adam_update(params, grads, st, lr);
  ops_.weights_changed();
  steps_ += 1;
  return result;
}

// torch.optim.SGD with momentum μ (no dampening, no Nesterov): b = μ b + (g + wd p); p -= lr b,
// composed of the backend's generic ops (x *= a, and x -= a_s y per segment).
void Optimizer::sgd_update(float* params, const float* grads, const OptimizerStepState& st, double lr) {
  float* buffer = slots_[0].data;
  ops_.scale(buffer, static_cast<float>(config_.momentum), elems_);
  ops_.apply_update({buffer, grads, segs_, std::vector<float>(segs_.size(), -st.adam.grad_scale)});
  std::vector<float> decay(segs_.size());
  bool decays = false;
  for (size_t s = 0; s < segs_.size(); ++s) {
    decay[s] = -segs_[s].weight_decay;
    decays = decays || decay[s] != 0.0f;
  }
  if (decays) ops_.apply_update({buffer, params, segs_, decay});
  ops_.apply_update({params, buffer, segs_, std::vector<float>(segs_.size(), static_cast<float>(lr))});
}

void Optimizer::adam_update(float* params, const float* grads, const OptimizerStepState& st, double lr) {
  const bool lamb = trust_ != TrustRatio::none;
  // LAMB: ‖p‖² and ‖u‖² per segment from the direction's own pass (p: [0, S), u: [S, 2S)).
  std::vector<double> seg_sums(lamb ? 2 * segs_.size() : 0);
  ops_.adam_direction({update_, slots_[0].data, slots_[1].data, grads, params, segs_, st.adam,
                       lamb ? seg_sums.data() : nullptr});

  std::vector<float> scale(segs_.size(), static_cast<float>(lr));
  if (lamb) {
    // Per tensor in one vector (p: [0, tensors), u: [tensors, 2 tensors)).
    std::vector<double> sums(2 * tensors_, 0.0);
    for (size_t s = 0; s < segs_.size(); ++s) {
      sums[tensor_of_[s]] += seg_sums[s];
      sums[tensors_ + tensor_of_[s]] += seg_sums[segs_.size() + s];
    }
    if (sum_across_shards_) sum_across_shards_(sums.data(), static_cast<int64_t>(sums.size()));
    for (size_t s = 0; s < segs_.size(); ++s) {
      const size_t tensor = tensor_of_[s];
      scale[s] = update_scale(lr, sums[tensor], sums[tensors_ + tensor],
                              trust_ratio_applies(trust_, segs_[s].weight_decay));
    }
  }
  ops_.apply_update({params, update_, segs_, scale});
}

OptimizerResult Optimizer::step_recorded(float* all_params, const float* all_grads, double lr, double grad_scale) {
  if (config_.kind == OptimizerKind::sgd) return step(all_params, all_grads, lr, grad_scale);
  BERT_CHECK(!sum_across_shards_ && begin_ == 0 && segs_.size() == tensors_, Code::internal,
             "a recorded optimizer step needs the unsharded optimizer");
  const OptimizerStepState inputs = step_inputs(lr, grad_scale);
  ops_.upload(state_, &inputs, sizeof inputs);
  OptimizerResult result;
  result.run = run_recorded(ops_, recording_, [&] {
    ops_.optimizer_step({all_params, slots_[0].data, slots_[1].data, update_, all_grads, segs_, trust_, state_});
  });
  OptimizerStepState done;
  ops_.download(&done, state_, sizeof done);
  result.grad_norm = done.grad_norm;
  result.skipped = done.skipped != 0;
  if (!result.skipped) {
    ops_.weights_changed();
    steps_ += 1;
  }
  return result;
}

}  // namespace bert
