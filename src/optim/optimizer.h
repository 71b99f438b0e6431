// LAMB (apex FusedLAMB as used by NVIDIA DLE BERT, with the NVLAMB switch), AdamW and SGD with
// momentum (torch.optim.SGD) over the flat parameter buffer. LAMB and AdamW share the Adam moment
// update (Ops::adam_direction); LAMB then scales each tensor's update by its trust ratio ‖p‖/‖u‖.
// Each optimizer declares its state as named slots (one parameter-sized buffer each: Adam's
// exp_avg and exp_avg_sq, SGD's momentum_buffer); checkpoints store them under those names and
// the session moves them without knowing what they hold. A sharded optimizer (ZeRO-1 style) owns
// one contiguous slice of the flat buffer: its slots cover only that slice, and the per-tensor
// sums of squares of the slices are added across ranks before they are used. With CUDA graphs an
// unsharded Adam-family step runs as recorded work (step_recorded).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/param_table.h"

namespace bert {

enum class OptimizerKind { lamb, adamw, sgd };
// "lamb", "adamw", "sgd": the config's train.optimizer and the name checkpoints record.
const char* optimizer_name(OptimizerKind kind);
OptimizerKind parse_optimizer_kind(const std::string& name);  // Error(config) naming the value
// The state slots an optimizer keeps, in name order (the checkpoint's /optimizer groups).
std::vector<std::string> optimizer_slot_names(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::lamb;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6;  // LAMB, AdamW
  double momentum = 0.9;                          // SGD
  // Not applied to biases and LayerNorm. LAMB/AdamW: decoupled (added to the update); SGD: L2,
  // added to the gradient (torch.optim.SGD's weight_decay).
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;  // global-norm clipping; 0 disables
  bool bias_correction = true;
  bool nvlamb = false;         // LAMB: apply the trust ratio to every tensor
};

struct OptimizerResult {
  double grad_norm = 0;  // of the averaged gradient, before clipping
  bool skipped = false;  // non-finite gradient: no update
  RecordedRun run = RecordedRun::direct;  // step_recorded: how the step's work ran
};

// The slice [begin, end) of the flat parameter buffer an optimizer updates, and how its partial
// per-tensor sums become the whole tensors' (summed over the ranks holding the other slices).
struct OptimizerShard {
  int64_t begin = 0, end = -1;  // end < 0: the whole buffer (unsharded)
  std::function<void(double* data, int64_t n)> sum_across_shards;  // empty: nothing to add
};

// One slot of optimizer state: elems() floats of backend memory, named as checkpoints store it.
struct OptimizerSlot {
  std::string name;
  float* data = nullptr;
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, const ParamTable& table, Ops& ops, const OptimizerShard& shard = {});
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates params from the raw accumulated gradient, which is first multiplied by
  // grad_scale (1 / (micro-batches × ranks)) and clipped. params and grads are the whole flat
  // buffers; only the shard's slice is read (of grads) and written (of params).
  OptimizerResult step(float* params, const float* grads, double lr, double grad_scale);
  // The same step as one backend op with its scalars in backend memory (Ops::optimizer_step),
  // run through a recording (CUDA graphs: recorded on the second call, replayed after); the host
  // uploads the step's scalars before and reads the norm and skip flag after. Unsharded only; the
  // same bits as step(). params and grads must be the same buffers on every call.
  // SGD has no device-resident step: it runs step().
  OptimizerResult step_recorded(float* params, const float* grads, double lr, double grad_scale);

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  // The state of the shard's slice (elems() floats per slot, for flat offsets shard_begin()...),
  // one slot per optimizer_slot_names(kind), in that order.
  const std::vector<OptimizerSlot>& slots() const { return slots_; }
  float* slot(const std::string& name);  // Error(internal) for a slot this optimizer does not keep
  int64_t elems() const { return elems_; }
  // Backend memory of the slots and the step's work buffer.
  uint64_t state_bytes() const {
    return static_cast<uint64_t>(slots_.size() + (update_ != nullptr ? 1 : 0)) * static_cast<uint64_t>(elems_) * sizeof(float);
  }
  int64_t shard_begin() const { return begin_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  Ops& ops_;
  std::vector<ParamSegment> segs_;  // the slice's parts of the tensors, offsets from begin_
  std::vector<size_t> tensor_of_;    // segs_[i] is part of tensor tensor_of_[i]
  size_t tensors_ = 0;
  std::function<void(double*, int64_t)> sum_across_shards_;
  int64_t begin_ = 0;
  int64_t elems_ = 0;
  int64_t steps_ = 0;
  TrustRatio trust_ = TrustRatio::none;
  // Per-tensor sums of squares of x (the slice, from begin_) over the slice's parts.
  std::vector<double> tensor_sums(const float* x);
  // The inputs of step steps_ + 1's scalars.
  OptimizerStepState step_inputs(double lr, double grad_scale) const;
  // The updates once the step's scalars are derived (not skipped).
  void adam_update(float* params, const float* grads, const OptimizerStepState& st, double lr);
  void sgd_update(float* params, const float* grads, const OptimizerStepState& st, double lr);
  std::vector<OptimizerSlot> slots_;
  float* update_ = nullptr;  // LAMB, AdamW: the step's direction
  OptimizerStepState* state_ = nullptr;  // backend memory, for step_recorded
  RecordingSlot recording_;
};

}  // namespace bert
