// SessionConfig: the one JSON config schema shared by the C API, the tools and every binding
// (documented in README.md, "Config schema"). parse_session_config validates every key and
// fills defaults; to_json() gives the resolved config back.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/precision.h"
#include "dist/communicator.h"
#include "model/bert_config.h"
#include "model/task_config.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace bert {

// train.init_optimizer_state: "auto" takes init_checkpoint's moments when a pretraining session
// starts from a file that holds them for its optimizer; "load" requires them; "zero" starts from
// zero moments (fine-tuning always does).
enum class InitOptimizerState { automatic, load, zero };

struct TrainConfig {
  int micro_batch = 8;
  int accumulation_steps = 1;
  // > 0: sequences per optimizer step over all ranks (DLE's batch size); the session derives
  // accumulation_steps = global_batch / (micro_batch x world size) and fails when it does not divide.
  int64_t global_batch = 0;
  bool accumulation_given = false;  // accumulation_steps was in the config (checked against global_batch)
  int64_t steps = 100;
  uint64_t seed = 12345;
  int threads = 0;  // 0: all cores
  double lr = 1e-3;
  double warmup_proportion = 0.01;  // of schedule_steps
  int64_t schedule_steps = 0;       // the LR schedule's length (MLPerf's opt_learning_rate_training_steps); 0: steps
  int64_t start_warmup_step = 0;    // MLPerf's: the warmup ramp starts there (negative: before step 1)
  double end_lr = 0;                // the LR the decay ends at
  double decay_degree = 0.5;
  LrScheduleKind lr_schedule = LrScheduleKind::poly;  // "poly" (DLE, MLPerf) or "linear" (HF's Trainer)
  OptimizerConfig optimizer;
  Precision precision = Precision::fp32;
  LossScaleConfig loss_scale;    // mode "dynamic" by default with fp16, "none" otherwise
  bool fused_attention = false;  // CUDA: cuDNN's fused attention instead of the reference kernels
  bool cuda_graphs = false;      // CUDA: each micro-batch's forward and backward (with the all-reduce's buckets) replayed as a CUDA graph
  bool debug_sync = false;       // wait for the backend before and after every op, naming the op a failure came from
  bool recompute_gelu = false;       // recompute the GELU output in backward instead of keeping it
  bool recompute_attention = false;  // recompute attention probabilities in backward
  int log_every = 10;
  int64_t eval_every = 0;          // bert-train evaluates every N steps (0: at the end only)
  int64_t eval_every_samples = 0;  // ... or each time this many more training samples were seen (MLPerf)
  double target_mlm_accuracy = 0;  // bert-train stops once an evaluation reaches it (0: never)
  bool dropout = true;  // false: train without dropout (tests, debugging)
  int phase = 1;                 // 1 or 2 (DLE's two-phase recipe), recorded in checkpoints
  std::string init_checkpoint;   // weights to start from (phase 2, continued pretraining)
  // The optimizer moments at the start (DLE's phase 2 continues phase 1's): taken from
  // init_checkpoint, with the optimizer's step count, the schedule and the LR starting afresh.
  InitOptimizerState init_optimizer_state = InitOptimizerState::automatic;
};

// data.source: seeded synthetic batches, or HDF5 shards from data.train_dir.
enum class DataSourceKind { synthetic, hdf5 };

struct DataConfig {
  DataSourceKind source = DataSourceKind::synthetic;
  std::string train_dir, eval_dir, format = "auto";
  int max_seq_length = 128;
  int max_predictions_per_seq = 20;
  int eval_batches = 4;     // synthetic eval
  int64_t eval_samples = 0; // eval_dir: evaluate the first N sequences (0: all of them)
  bool skip_bad_shards = false;
  bool unpad = true;  // drop padding tokens from the computation
  // Padded batches keep their longest sequence rounded up to a multiple of this many tokens
  // (0: the batch's seq_length). With train.cuda_graphs an unpadded batch is padded so too
  // (64 tokens when 0): one recording per length bin.
  int pad_to_multiple = 0;
  int bucket_bins = 0;
  bool length_bins = false;  // train_dir holds bin_0.. (bert-prep bins); all ranks draw the same bin per batch
  bool balance_ranks = false;  // exchange samples so ranks get similar token counts (own data only)
};

struct CheckpointConfig {
  std::string dir;       // where bert-train writes checkpoints ("" = none)
  int64_t every = 0;     // steps between checkpoints (0 = only at the end)
  int keep = 3;          // newest checkpoints kept in dir
  int64_t keep_every = 0;  // also keep every checkpoint whose step is a multiple of this
  bool discard_invalid = false;  // a resume renames checkpoints that fail verification aside
  bool continue_on_failure = false;  // on_failure: "stop" the run at a failed periodic checkpoint, or "continue"
};

struct DistConfig {
  double timeout_s = 300;      // a collective waiting longer for a peer fails with BERT_ERR_DISTRIBUTED
  bool clip_per_rank = false;  // clip each rank's gradient before the all-reduce (Samsung) instead of after
  // bert_step reduces gradients in buckets of about this many MiB while the backward pass goes
  // on (0: one all-reduce after the backward pass).
  double bucket_mb = 25;
  WirePrecision wire_precision = WirePrecision::fp32;  // gradients on the wire
  // Distributed optimizer: gradients reduce-scattered, each rank updates (and keeps the LAMB/AdamW
  // moments of) 1/world of the flat parameters, the weights are all-gathered after the step.
  bool shard_optimizer = false;
};

// Run logs written by bert-train on rank 0 (the session itself ignores them).
struct LogConfig {
  std::string metrics;  // DLLogger-style JSON lines per logged step and per evaluation
  std::string mlperf;   // MLPerf :::MLLOG lines
  std::string submission_org = "bertengine", submission_platform, submission_division = "closed",
              submission_status = "research";
};

struct SessionConfig {
  BertConfig model;
  TaskConfig task;            // the head: pretraining (default) or a fine-tuning task
  bool inference = false;     // "mode": "inference": forward only, no gradients or optimizer state
  TrainConfig train;
  DataConfig data;
  CheckpointConfig checkpoint;
  DistConfig dist;
  LogConfig log;
  std::string device = "cpu";  // "cpu" or "cuda" / "cuda:N", as written in the config
  int cuda_index = -1;         // N of "cuda:N"; -1 for "cuda" (the rank's local rank) and "cpu"
  bool on_cuda() const { return device != "cpu"; }
  nlohmann::json to_json() const;
};

// Parses config text; throws Error(config) naming the key at fault.
SessionConfig parse_session_config(const std::string& json_text);

}  // namespace bert
