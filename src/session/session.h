// Session = config + backend + model + optimizer + data + communicator: the object the C API
// wraps. It runs micro-batches, reduces gradients, steps the optimizer on the schedule,
// evaluates, runs inference, and saves/loads weights. An inference session ("mode":
// "inference") has no gradients, optimizer or data source. One thread at a time; abort() from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/op_sync_check.h"
#include "backend/ops.h"
#include "backend/thread_device.h"
#include "ckpt/training_state.h"
#include "data/batch.h"
#include "data/eval_set.h"
#include "dist/communicator.h"
#include "model/bert_model.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "session/gradient_sync.h"
#include "session/session_config.h"

namespace bert {

struct CheckpointContents;

// The pretraining view of a host batch (its pointers borrowed; no fine-tuning labels).
BatchView view_of(const HostBatch& b);

struct StepStats {
  int64_t step = 0;
  double loss = 0, mlm_loss = 0, nsp_loss = 0;  // loss: the task's loss (pretraining: mlm + nsp)
  double learning_rate = 0, grad_norm = 0, loss_scale = 1;
  bool skipped = false;
  int micro_batches = 0;
  int64_t sequences = 0, tokens = 0;
  double seconds = 0;
};

struct EvalStats {
  double mlm_accuracy = 0, mlm_loss = 0, nsp_accuracy = 0, nsp_loss = 0;
  int64_t sequences = 0, masked_tokens = 0;
  // Fine-tuning sessions: the head's loss as Hugging Face computes it over the whole batch, and
  // its accuracy (NaN for regression) over task_count sequences (labelled tokens: token
  // classification). 0 for pretraining sessions.
  double task_loss = 0, task_accuracy = 0;
  int64_t task_count = 0;
};

struct SessionMemory {
  uint64_t parameter_bytes = 0;   // fp32 weights (flat buffer)
  uint64_t gradient_bytes = 0;    // 0 for an inference session
  uint64_t optimizer_bytes = 0;   // the optimizer's slots (and Adam's update buffer) for this rank's parameters
  uint64_t activation_bytes = 0;  // the activation arena
  uint64_t peak_bytes = 0;        // the backend's peak memory held at once
};

// Tests' and benchmarks' hook: receives the backend the config selects and returns the one the
// session uses (e.g. the cost model over it).
using BackendWrapper = std::function<std::unique_ptr<Ops>(std::unique_ptr<Ops>)>;

class Session {
 public:
  Session(const SessionConfig& config, std::unique_ptr<Communicator> comm, const BackendWrapper& wrap_backend = {});
  ~Session();

  // A host calling from any of its threads (the C API): the calling thread has this session's
  // GPU current while the returned guard lives, and its own CUDA context again after it.
  ThreadDevice on_this_thread() const { return ThreadDevice(ops_->device() >= 0, ops_->device()); }
  // The calling thread's CUDA context, made current again when the returned guard ends: creating
  // a session makes the session's GPU current (tools keep it; a host's thread gets its own back).
  static ThreadDevice keep_thread_device(const SessionConfig& c) { return ThreadDevice(c.on_cuda(), -1); }

  const SessionConfig& config() const { return config_; }
  const std::string& config_json() const { return config_json_; }
  BertModel& model() { return *model_; }
  Ops& ops() { return *ops_; }
  const Communicator& communicator() const { return *comm_; }
  int64_t global_step() const { return global_step_; }
  // Parameters whose optimizer state this rank keeps (all of them unless dist.shard_optimizer).
  int64_t optimizer_elems() const { return optimizer_ ? optimizer_->elems() : 0; }
  // The backend memory this session holds, from the engine's own accounting (bert_session_memory).
  SessionMemory memory() const;
  const LrSchedule& schedule() const { return schedule_; }

  StepStats forward_backward(const BatchView& batch);
  void allreduce();
  StepStats optimizer_step();
  // batch == nullptr: draw accumulation_steps micro-batches from the session's data source.
  StepStats step(const BatchView* batch);
  // batch == nullptr: the whole evaluation set, split across ranks (COLLECTIVE then).
  EvalStats eval(const BatchView* batch);
  void allreduce_host(float* data, int64_t n, ReduceOp op);
  // Forward without gradients or dropout, in micro-batches of train.micro_batch; copies `what`
  // for the whole batch into out (at least model().output_elems(what, B, S) floats).
  void infer(const BatchView& batch, ModelOutput what, float* out, size_t count);

  // Full training state. An empty path writes <checkpoint.dir>/ckpt_<step>.h5 and applies
  // retention. Returns the path written. Rank 0 writes; every rank contributes its cursor.
  std::string save_checkpoint(const std::string& path);
  // Resumes the full training state (weights, moments, step, dropout stream, data cursor).
  void load_checkpoint(const std::string& path);
  // Weights only (phase 2, fine-tuning, continued pretraining); optimizer and step unchanged.
  void load_weights(const std::string& path);
  // (A task session drops other heads' tensors from c.model.)
  void load_weights(CheckpointContents& c, const std::string& path);
  // Loads the newest checkpoint in dir (default checkpoint.dir) that passes verification; only
  // checkpoints of the run that owns the directory (wrote its most recent checkpoint) are
  // candidates. Returns its step, or -1 if the directory has none. Checkpoints newer than the
  // one it would load that fail verification stop it (Error(checkpoint) naming each one and why,
  // the session unchanged), unless checkpoint.discard_invalid, which renames them aside.
  int64_t resume_latest(const std::string& dir);
  // This run's id: fresh (rank 0's, shared) at creation, the checkpoint's once one is loaded.
  const std::string& run_id() const { return run_id_; }

  // Parameter interop in Hugging Face shapes; throws Error(invalid_argument) on a bad name/count.
  void read_param(const std::string& name, float* dst, size_t count, bool gradient);
  void write_param(const std::string& name, const float* src, size_t count);

  void abort() { abort_.store(true); }
  void clear_abort() { abort_.store(false); }

 private:
  // A checkpoint's training state, read, verified and checked against this session, not yet applied.
  struct ResumeState {
    std::string path;
    TrainingState state;
    // Whole parameter-sized host buffers: the weights, and each optimizer slot by name.
    std::vector<float> weights;
    std::map<std::string, std::vector<float>> slots;
    SessionConfig config;              // this session's, with the checkpoint's seed
    std::unique_ptr<DataSource> data;  // positioned at the checkpoint's cursor (training data only)
  };
  // Uploads whole parameter-sized host buffers of the optimizer's slots (its shard's slices).
  void upload_slots(const std::map<std::string, std::vector<float>>& slots);
  // train.init_optimizer_state: the moments of init_checkpoint's contents, when it asks for them.
  void init_optimizer_state(const CheckpointContents& c, const std::string& path);
  // Throws Error(checkpoint/io) and leaves the session as it was.
  ResumeState prepare_resume(const std::string& path) const;
  void apply_resume(ResumeState& r);
  // Refuses (or warns about) a checkpoint whose config makes its state mean something else here.
  void check_resumable(const std::string& path, const nlohmann::json& saved_config) const;
  // Refuses to write into a checkpoint.dir owned by another run (Error(checkpoint)).
  void check_directory_owner() const;
  const ParamEntry& entry(const std::string& name, size_t count) const;
  // How batches become token rows: data.unpad and data.pad_to_multiple, or per length bin when recorded.
  Padding padding() const;
  // fixed_mlm_rows: Padding::fixed_mlm_rows (recorded work, and any training on a GPU).
  ModelInputs inputs(const BatchView& batch, bool need_labels = true, bool fixed_mlm_rows = false) const;
  // Throws Error(unsupported) naming `call` in an inference session.
  void require_training(const char* call) const;
  // last_of_step: the final micro-batch before the all-reduce, whose backward may start it.
  StepStats forward_backward(const BatchView& batch, bool last_of_step);
  void discard_accumulation();
  void warn_if_other_activation(const CheckpointContents& c, const std::string& path) const;
  void run_step_micro_batches(const BatchView* batch);
  void clip_local_gradient();
  // Logs that the model recorded a micro-batch of in's shape as a CUDA graph (with_buckets: with
  // the gradient all-reduce's buckets).
  void note_recording(const ModelInputs& in, bool with_buckets) const;
  // Host memory holding `values` (a full parameter-sized buffer): the buffer itself on the CPU
  // backend, else `copy`, downloaded into.
  const float* host_values(const float* values, std::vector<float>& copy) const;
  // The same for an optimizer slot (this rank's slice when sharded: gathered from every rank,
  // COLLECTIVE then).
  const float* host_slot(float* slot, std::vector<float>& copy);
  void log_token_imbalance();
  ForwardStats eval_whole_set();
  EvalStats eval_task(const BatchView& batch);
  template <typename F>
  auto abortable(F&& body) -> decltype(body());

  SessionConfig config_;
  std::string config_json_;
  // Destruction order is a contract: members are destroyed bottom-up, and each one below holds
  // memory, streams or buffers of those above it. The gradient sync uses the communicator and
  // the backend; the optimizer, model and data sources hold backend memory; the NCCL
  // communicator runs on the backend's device. So ops_ goes last and comm_ just before it;
  // add a member below the ones it uses.
  OpSyncCheck sync_check_;  // observes ops_ with train.debug_sync (declared first: outlives it)
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<BertModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataSource> train_data_;
  std::unique_ptr<EvalSet> eval_set_;  // bert_eval without a batch; read at the first evaluation
  std::unique_ptr<GradientSync> sync_;
  std::vector<int64_t> shard_counts_;  // sharded optimizer: each rank's slice length (empty: unsharded)
  LossScaler scaler_;
  LrSchedule schedule_;
  HostBatch host_batch_;

  std::string run_id_;
  bool owns_checkpoint_dir_ = false;  // checked at the first periodic checkpoint of this run id
  int64_t global_step_ = 0;
  uint64_t micro_step_ = 0;  // dropout stream position: one per training forward
  int accum_micro_ = 0;
  double accum_mlm_ = 0, accum_nsp_ = 0, accum_task_ = 0;
  int64_t accum_sequences_ = 0, accum_tokens_ = 0;
  std::atomic<bool> abort_{false};
};

}  // namespace bert
