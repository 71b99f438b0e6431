// LAMB (apex FusedLAMB as used by NVIDIA DLE BERT, with the NVLAMB switch) and AdamW over the
// flat parameter buffer. Both share the Adam moment update (Ops::adam_direction); LAMB then
// scales each tensor's update by its trust ratio ‖p‖/‖u‖. A sharded optimizer (ZeRO-1 style)
// owns one contiguous slice of the flat buffer: its moments cover only that slice, and the
// per-tensor sums of squares of the slices are added across ranks before they are used. With CUDA
// graphs an unsharded optimizer's step runs as recorded work (step_recorded).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/param_table.h"

namespace bert {

struct OptimizerConfig {
  std::string name = "lamb";  // "lamb" or "adamw"
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6;
  double weight_decay = 0.01;  // not applied to biases and LayerNorm
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
  OptimizerResult step_recorded(float* params, const float* grads, double lr, double grad_scale);

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  // The moments of the shard's slice (elems() floats each, for flat offsets shard_begin()...).
  float* exp_avg() { return m_; }
  float* exp_avg_sq() { return v_; }
  int64_t elems() const { return elems_; }
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
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* update_ = nullptr;
  OptimizerStepState* state_ = nullptr;  // backend memory, for step_recorded
  RecordingSlot recording_;
};

}  // namespace bert
