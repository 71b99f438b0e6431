// bert-bench --cost-model DEVICE: one training step of the requested shape run through the
// session on CostModelOps (no arithmetic), then the predicted step on that GPU printed as tables
// per op and per kernel kind, with sequences/s and model-FLOPs utilisation — a prediction. With
// data.length_bins: one line per bin and the mix the session's bin draws make.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "perf/cost_model_ops.h"
#include "session/session.h"

namespace bert_tools {

struct CostModelRequest {
  std::string device;       // "h100" or "a100"
  nlohmann::json config;    // the session config bert-bench built (its device/precision are replaced)
  bert::Precision precision = bert::Precision::bf16;  // the CUDA backend's precision to model
  // Model FLOPs of the step from the resolved model config (bert-bench's analytic count; unset: 0).
  std::function<double(const nlohmann::json& model)> model_flops;
  int batch = 0;            // sequences per step
  double peak_tflops = 0;   // overrides the device's peak for the GEMM precision (0: keep)
  double bandwidth_tbs = 0; // overrides the device's memory bandwidth (0: keep)
  bool graphed = false;     // each micro-batch's forward and backward replays as a CUDA graph (as the session records it)
  // bf16/fp16: activations stored in 16 bits, as the session runs them (false: fp32 activations
  // cast before each GEMM, the backend before 16-bit activations and with fused attention).
  bool activations_16bit = true;
  bool fused_attention = false;  // cuDNN's fused attention (16-bit activations)
  int world = 1;            // data-parallel ranks: adds the gradient all-reduce
  double link_gbs = 0;      // per-GPU link bandwidth for the all-reduce (0: the device's NVLink)
  bool shard_optimizer = false;  // optimizer work divided by world (reduce-scatter + all-gather)
};

// Prints the tables and a JSON summary line; returns the process exit code.
int run_cost_model(const CostModelRequest& request);

// The GPU the request models (its peak, bandwidth and link overrides applied; Error on a bad
// world or device) and the CUDA backend options it runs with.
bert::DeviceModel requested_device(const CostModelRequest& request);
bert::CostModelOptions requested_options(const CostModelRequest& request);
// The steady-state training step of request.config predicted on request.device (no length bins).
bert::StepPrediction forecast_step(const CostModelRequest& request);
// A session of request.config on CostModelOps (no arithmetic, memory address space only), as rank
// 0 of request.world ranks whose collectives do nothing but add their modelled cost: the run's
// batch split, optimizer share and memory accounting, for any model size on any machine.
std::unique_ptr<bert::Session> planned_session(const CostModelRequest& request);

}  // namespace bert_tools
