// LAMB (apex FusedLAMB as used by NVIDIA DLE BERT, with the NVLAMB switch) and AdamW over the
// flat parameter buffer. Both share the Adam moment update (Ops::adam_direction); LAMB then
// scales each tensor's update by its trust ratio ‖p‖/‖u‖.
#pragma once

#include <cstdint>
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
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, const ParamTable& table, Ops& ops);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates params from the raw accumulated gradient, which is first multiplied by
  // grad_scale (1 / (micro-batches × ranks)) and clipped.
  OptimizerResult step(float* params, const float* grads, double lr, double grad_scale);

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  float* exp_avg() { return m_; }
  float* exp_avg_sq() { return v_; }
  int64_t elems() const { return elems_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  Ops& ops_;
  std::vector<ParamSegment> segs_;
  int64_t elems_ = 0;
  int64_t steps_ = 0;
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* update_ = nullptr;
};

}  // namespace bert
