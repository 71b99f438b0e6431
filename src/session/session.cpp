// Session: training, evaluation and checkpoint operations behind the C API.
#include "session/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_dir.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "core/log.h"
#include "data/cursor_rescale.h"
#include "data/eval_set.h"
#include "data/length_bin_source.h"
#include "data/shard_source.h"
#include "data/synthetic_source.h"
#include "session/rank_balance.h"
#include "dist/config_agreement.h"

namespace bert {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Seed derivations from train.seed. Checkpoints record train.seed and the stream positions,
// and a resumed run re-derives every stream from them: changing a constant changes every
// resumed run's random numbers (dropout masks, synthetic batches), so they are contracts.
constexpr uint64_t kSyntheticRankStride = 1000003;  // rank r's synthetic batches: seed + r * stride
constexpr uint64_t kEvalSeedMask = 0xE7A1;          // synthetic eval batches: seed ^ mask
constexpr uint64_t kDropoutRankStride = 7919;       // rank r's dropout stream: seed + r * stride
// The most micro-batches one optimizer step may accumulate.
constexpr int64_t kMaxAccumulationSteps = int64_t{1} << 16;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "cuda" picks the GPU from the rank's local rank; "cuda:N" names it.
std::unique_ptr<Ops> make_backend(const SessionConfig& c, int local_rank) {
  if (c.device == "cpu") return make_cpu_ops(c.train.threads, c.train.precision);
  const int index = c.cuda_index >= 0 ? c.cuda_index : local_rank;
  CudaOptions options;
  options.precision = c.train.precision;
  options.fused_attention = c.train.fused_attention;
  // bf16/fp16 store activations, their gradients and the saved tensors in 16 bits.
  options.activations_16bit = is_16bit(c.train.precision);
  std::unique_ptr<Ops> ops = make_cuda_ops(index, options);
  if (!ops) fail(Code::unsupported, "config key 'device' = \"", c.device, "\": this build of bertengine has no CUDA backend");
  return ops;
}

// Rows [begin, begin + count) of a batch, as a view; `token_labels`: labels are [B, S].
BatchView slice(const BatchView& b, int begin, int count, bool token_labels) {
  BatchView v = b;
  v.batch_size = count;
  const int64_t s = static_cast<int64_t>(begin) * b.seq_length, p = static_cast<int64_t>(begin) * b.max_predictions;
  v.input_ids += s;
  v.segment_ids += s;
  v.input_mask += s;
  if (v.masked_lm_positions) v.masked_lm_positions += p;
  if (v.masked_lm_ids) v.masked_lm_ids += p;
  if (v.next_sentence_labels) v.next_sentence_labels += begin;
  if (v.labels) v.labels += token_labels ? s : begin;
  if (v.label_values) v.label_values += begin;
  if (v.start_positions) v.start_positions += begin;
  if (v.end_positions) v.end_positions += begin;
  return v;
}

SyntheticOptions synthetic_options(const SessionConfig& c, uint64_t seed) {
  SyntheticOptions o;
  o.vocab_size = c.model.vocab_size;
  o.seq_length = c.data.max_seq_length;
  o.max_predictions = c.data.max_predictions_per_seq;
  o.seed = seed;
  return o;
}

// The training data of this rank.
std::unique_ptr<DataSource> make_data_source(const SessionConfig& c, int rank, int world) {
  if (c.data.source == DataSourceKind::synthetic) {
    return make_synthetic_source(synthetic_options(c, c.train.seed + kSyntheticRankStride * static_cast<uint64_t>(rank)));
  }
  ShardSourceOptions o;
  o.path = c.data.train_dir;
  o.format = c.data.format;
  o.max_seq_length = c.data.max_seq_length;
  o.max_predictions_per_seq = c.data.max_predictions_per_seq;
  o.vocab_size = c.model.vocab_size;
  o.seed = c.train.seed;  // the same on every rank (world_seed): ranks take disjoint files of one shuffle
  o.rank = rank;
  o.world = world;
  o.skip_bad_shards = c.data.skip_bad_shards;
  o.bucket_bins = c.data.bucket_bins;
  o.batch_size = c.train.micro_batch;
  return c.data.length_bins ? make_length_bin_source(o) : make_shard_source(o);
}

// The evaluation set: data.eval_dir (all of it, or data.eval_samples sequences), whatever the
// training data; without one, data.eval_batches seeded synthetic batches of synthetic training data.
std::unique_ptr<EvalSet> make_eval_set(const SessionConfig& c) {
  if (c.data.eval_dir.empty()) {
    BERT_CHECK(c.data.source == DataSourceKind::synthetic, Code::config,
               "evaluation needs data.eval_dir (the training data comes from data.train_dir)");
    std::unique_ptr<DataSource> source = make_synthetic_source(synthetic_options(c, c.train.seed ^ kEvalSeedMask));
    return EvalSet::from_source(*source, c.data.eval_batches, c.train.micro_batch);
  }
  const ShardLimits limits{c.data.max_seq_length, c.data.max_predictions_per_seq, c.model.vocab_size};
  return EvalSet::from_shards(c.data.eval_dir, limits, c.data.format, c.data.eval_samples, c.train.micro_batch);
}

// train.global_batch = micro_batch x accumulation_steps x world size (DLE's batch size).
void derive_accumulation(TrainConfig& t, int world) {
  if (t.global_batch <= 0) return;
  const int64_t per_pass = static_cast<int64_t>(t.micro_batch) * world;
  if (t.global_batch % per_pass != 0) {
    fail(Code::config, "config key 'train.global_batch' = ", t.global_batch, " is not a multiple of train.micro_batch (",
         t.micro_batch, ") x world size (", world, ") = ", per_pass);
  }
  const int64_t accumulation = t.global_batch / per_pass;
  if (t.accumulation_given && accumulation != t.accumulation_steps) {
    fail(Code::config, "config key 'train.accumulation_steps' = ", t.accumulation_steps, " contradicts train.global_batch = ",
         t.global_batch, ", which needs ", accumulation, " with train.micro_batch ", t.micro_batch, " on ", world,
         " ranks (give one of the two)");
  }
  BERT_CHECK(accumulation <= kMaxAccumulationSteps, Code::config, "config key 'train.global_batch' = ", t.global_batch,
             " needs ", accumulation, " accumulation steps (more than ", kMaxAccumulationSteps, "): raise train.micro_batch");
  t.accumulation_steps = static_cast<int>(accumulation);
}

// 128 random bits as hex: the id stored in every checkpoint of a run.
std::string new_run_id() {
  std::random_device device;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  return text;
}

}  // namespace

BatchView view_of(const HostBatch& b) {
  BatchView v;
  v.batch_size = b.batch_size;
  v.seq_length = b.seq_length;
  v.max_predictions = b.max_predictions;
  v.input_ids = b.input_ids.data();
  v.segment_ids = b.segment_ids.data();
  v.input_mask = b.input_mask.data();
  v.masked_lm_positions = b.masked_lm_positions.data();
  v.masked_lm_ids = b.masked_lm_ids.data();
  v.next_sentence_labels = b.next_sentence_labels.data();
  return v;
}

Session::Session(const SessionConfig& config, std::unique_ptr<Communicator> comm, const BackendWrapper& wrap_backend)
    : config_(config), comm_(std::move(comm)), scaler_(config.train.loss_scale) {
  if (config_.train.threads <= 0) config_.train.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config_.train.seed = world_seed(*comm_, config_.train.seed);
  derive_accumulation(config_.train, comm_->world_size());
  config_json_ = config_.to_json().dump();
  check_same_config(*comm_, config_.to_json());
  run_id_ = comm_->allgather_text(new_run_id()).front();  // rank 0's
  ops_ = make_backend(config_, comm_->local_rank());
  if (wrap_backend) ops_ = wrap_backend(std::move(ops_));
  if (config_.train.debug_sync) ops_->add_observer(&sync_check_);
  ModelLimits limits;
  limits.max_batch = config_.train.micro_batch;
  limits.max_seq_length = config_.data.max_seq_length;
  limits.max_predictions = config_.data.max_predictions_per_seq;
  limits.recompute_gelu = config_.train.recompute_gelu;
  limits.recompute_attention = config_.train.recompute_attention;
  limits.inference = config_.inference;
  model_ = std::make_unique<BertModel>(config_.model, config_.task, limits, *ops_);
  model_->init_weights(config_.train.seed);
  std::optional<CheckpointContents> init;  // read once: weights now, optimizer moments below
  if (!config_.train.init_checkpoint.empty()) {
    init = read_checkpoint(config_.train.init_checkpoint);
    load_weights(*init, config_.train.init_checkpoint);
  }
  std::error_code ec;
  if (!config_.data.eval_dir.empty() && !fs::is_directory(config_.data.eval_dir, ec)) {
    fail(Code::config, "config key 'data.eval_dir': directory '", config_.data.eval_dir, "' does not exist");
  }
  if (!config_.checkpoint.dir.empty()) {
    try {
      check_writable_dir(config_.checkpoint.dir);
    } catch (const Error& e) {
      fail(Code::config, "config key 'checkpoint.dir': ", e.what());
    }
  }
  comm_->broadcast(model_->param_data(), model_->params().total_elems);
  ops_->weights_changed();
  std::string data = "none (batches from the host)";
  if (!config_.inference) {
    // Per-rank clipping needs the whole local gradient before any of it is reduced.
    // A sharded optimizer reduce-scatters the gradient after the backward pass (no buckets).
    // The local communicator has nothing to reduce (and buckets would give each batch shape a
    // second CUDA graph). With CUDA graphs the buckets are recorded with the backward pass.
    const bool shard = config_.dist.shard_optimizer && comm_->world_size() > 1;
    const bool buckets = !config_.dist.clip_per_rank && !shard && !comm_->is_local();
    sync_ = std::make_unique<GradientSync>(*comm_, model_->grad_data(), model_->params().total_elems,
                                           buckets ? config_.dist.bucket_mb : 0.0,
                                           config_.dist.wire_precision, ops_->native_stream(),
                                           config_.train.cuda_graphs);
    OptimizerConfig optimizer_config = config_.train.optimizer;
    if (config_.dist.clip_per_rank) optimizer_config.max_grad_norm = 0;  // clipped per rank in allreduce()
    OptimizerShard slice;
    if (shard) {  // rank r owns [n r / W, n (r + 1) / W) of the flat buffer
      const int64_t n = model_->params().total_elems, W = comm_->world_size();
      for (int64_t r = 0; r < W; ++r) shard_counts_.push_back(n * (r + 1) / W - n * r / W);
      slice.begin = n * comm_->rank() / W;
      slice.end = n * (comm_->rank() + 1) / W;
      slice.sum_across_shards = [this](double* data, int64_t count) { comm_->allreduce_sum_host(data, count); };
    }
    optimizer_ = std::make_unique<Optimizer>(optimizer_config, model_->params(), *ops_, slice);
    if (init) init_optimizer_state(*init, config_.train.init_checkpoint);
    schedule_.base_lr = config_.train.lr;
    schedule_.total_steps = config_.train.schedule_steps;
    schedule_.warmup_proportion = config_.train.warmup_proportion;
    schedule_.degree = config_.train.decay_degree;
    schedule_.start_warmup_step = config_.train.start_warmup_step;
    schedule_.end_lr = config_.train.end_lr;
    schedule_.kind = config_.train.lr_schedule;
    if (config_.task.pretraining()) {  // fine-tuning batches come from the host (bert-finetune reads them)
      train_data_ = make_data_source(config_, comm_->rank(), comm_->world_size());
      data = train_data_->describe();
    }
  }
  std::string graphs;
  if (config_.train.cuda_graphs && !config_.inference) {
    graphs = " with CUDA graphs";
    if (config_.data.unpad) graphs += " (batches padded to a multiple of " + std::to_string(padding().multiple) + " tokens)";
  }
  log_message(log_info, "session: " + config_.model.to_json().dump() + " " + config_.task.name() +
                            (config_.inference ? " (inference)" : "") + " on " + ops_->name() + graphs +
                            ", activation arena " + std::to_string(model_->arena_bytes() >> 20) + " MiB, data " +
                            data);
}

Session::~Session() = default;

SessionMemory Session::memory() const {
  SessionMemory m;
  m.parameter_bytes = static_cast<uint64_t>(model_->params().total_elems) * sizeof(float);
  m.gradient_bytes = model_->inference() ? 0 : m.parameter_bytes;
  m.optimizer_bytes = optimizer_ ? optimizer_->state_bytes() : 0;
  m.activation_bytes = model_->arena_bytes();
  m.peak_bytes = ops_->peak_bytes();
  return m;
}

// A recorded (CUDA graph) micro-batch is not packed, its sequence table would change with every
// batch: it is padded to its length bin instead, a multiple of data.pad_to_multiple or of 64
// tokens (cuDNN's flash tile), so there is one recording per bin.
Padding Session::padding() const {
  Padding p{config_.data.unpad, config_.data.pad_to_multiple};
  if (config_.train.cuda_graphs && p.unpad) p = Padding{false, p.multiple > 0 ? p.multiple : 64};
  p.prefix_masks = config_.train.fused_attention;
  return p;
}

ModelInputs Session::inputs(const BatchView& batch, bool need_labels, bool fixed_mlm_rows) const {
  Padding p = padding();
  p.fixed_mlm_rows = fixed_mlm_rows;
  return build_model_inputs(batch, config_.model, config_.task, config_.train.micro_batch, config_.data.max_seq_length,
                            config_.data.max_predictions_per_seq, p, need_labels);
}

void Session::require_training(const char* call) const {
  if (config_.inference) {
    fail(Code::unsupported, call, ": this session was created with \"mode\": \"inference\" (no gradients or optimizer "
         "state); create it with \"mode\": \"train\" to train");
  }
}

void Session::discard_accumulation() {
  if (sync_) sync_->drain();
  model_->zero_grads();
  accum_micro_ = 0;
  accum_mlm_ = accum_nsp_ = accum_task_ = 0;
  accum_sequences_ = accum_tokens_ = 0;
}

template <typename F>
auto Session::abortable(F&& body) -> decltype(body()) {
  if (abort_.exchange(false)) {
    discard_accumulation();
    fail(Code::aborted, "the call was aborted by bert_session_abort");
  }
  try {
    return body();
  } catch (const Error& e) {
    if (e.code() == Code::aborted) {
      abort_.store(false);
      discard_accumulation();
    }
    throw;
  }
}

StepStats Session::forward_backward(const BatchView& batch) { return forward_backward(batch, false); }

StepStats Session::forward_backward(const BatchView& batch, bool last_of_step) {
  require_training("bert_forward_backward");
  return abortable([&] {
    const auto t0 = Clock::now();
    // On a GPU (or the cost model of one: a backend holding no values) every training micro-batch
    // takes fixed MLM rows, recorded or not: the MLM head's GEMMs then have one shape per batch
    // size, and cuBLASLt one algorithm (one summation order) for them, so a run with CUDA graphs
    // gives the bits of the run without.
    const bool gpu = ops_->device() >= 0 || !ops_->holds_values();
    ModelInputs in = inputs(batch, true, config_.train.cuda_graphs || gpu);
    DropoutStream drop;
    drop.enabled = config_.train.dropout;
    drop.seed = config_.train.seed + kDropoutRankStride * static_cast<uint64_t>(comm_->rank());
    drop.step = micro_step_;
    BackwardOptions backward;
    backward.loss_scale = static_cast<float>(scaler_.scale());
    backward.recorded = config_.train.cuda_graphs;
    if (last_of_step && sync_->overlaps()) {
      backward.on_grads_ready = [this](int64_t offset) { sync_->grads_ready(offset); };
    }
    const RecordingCounts before = model_->recording_counts();
    ForwardStats f = model_->run(in, drop, &backward, &abort_);
    if (model_->recording_counts().recorded != before.recorded) note_recording(in, backward.on_grads_ready != nullptr);
    // A replay queues the buckets recorded with the backward pass without calling on_grads_ready.
    if (backward.on_grads_ready && model_->recording_counts().replayed != before.replayed) sync_->replayed();
    ++micro_step_;
    ++accum_micro_;
    accum_mlm_ += f.mlm_loss();
    accum_nsp_ += f.nsp_loss();
    accum_task_ += f.task_loss();
    accum_sequences_ += in.batch_size();
    accum_tokens_ += in.real_tokens;
    StepStats s;
    s.step = global_step_;
    s.mlm_loss = f.mlm_loss();
    s.nsp_loss = f.nsp_loss();
    s.loss = config_.task.pretraining() ? s.mlm_loss + s.nsp_loss : f.task_loss();
    s.micro_batches = 1;
    s.sequences = in.batch_size();
    s.tokens = in.real_tokens;
    s.seconds = seconds_since(t0);
    return s;
  });
}

// A new CUDA graph is worth a line: one per batch shape is expected, more mean something changes
// the recorded work's arguments (the loss scale) or frees backend memory between micro-batches.
void Session::note_recording(const ModelInputs& in, bool with_buckets) const {
  const RecordingCounts& counts = model_->recording_counts();
  std::ostringstream os;
  os << "micro-batch " << micro_step_ + 1 << ": recorded the forward and backward of " << in.batch_size() << " x "
     << in.layout.uniform_length() << " tokens" << (with_buckets ? " with the gradient all-reduce's buckets" : "")
     << " as a CUDA graph (" << counts.recorded << " recorded, "
     << counts.replayed << " replays so far)";
  log_message(log_info, os.str());
}

void Session::allreduce() {
  require_training("bert_allreduce");
  abortable([&] {
    if (config_.dist.clip_per_rank && accum_micro_ > 0) clip_local_gradient();
    if (shard_counts_.empty()) sync_->finish();
    else comm_->reduce_scatter_sum(model_->grad_data(), shard_counts_);
    if (comm_->world_size() > 1 && (global_step_ + 1) % config_.train.log_every == 0) log_token_imbalance();
  });
}

// Samsung's per-rank clipping: this rank's averaged gradient is clipped to max_grad_norm
// before the sum, so the reduced gradient's norm is at most max_grad_norm too.
void Session::clip_local_gradient() {
  const double max_norm = config_.train.optimizer.max_grad_norm;
  if (max_norm <= 0) return;
  const ParamTable& table = model_->params();
  const std::vector<ParamSegment> all = table.segments(0.0f);
  std::vector<double> sq(all.size());
  ops_->segment_sumsq({sq.data(), model_->grad_data(), all});
  double total = 0;
  for (double v : sq) total += v;
  const double norm = std::sqrt(total) / accum_micro_ / scaler_.scale();
  if (std::isfinite(norm) && norm > max_norm) ops_->scale(model_->grad_data(), static_cast<float>(max_norm / norm), table.total_elems);
}

// On logging steps, every rank's real-token count of the step, gathered in one small all-reduce
// (every rank takes part; rank 0 logs): the imbalance (heaviest rank / mean - 1) is how long the
// others wait for the slowest.
void Session::log_token_imbalance() {
  std::vector<float> tokens(comm_->world_size(), 0.0f);
  tokens[comm_->rank()] = static_cast<float>(accum_tokens_);
  comm_->allreduce_host(tokens.data(), static_cast<int64_t>(tokens.size()), ReduceOp::sum);
  double sum = 0;
  size_t heaviest = 0;
  for (size_t r = 0; r < tokens.size(); ++r) {
    sum += tokens[r];
    if (tokens[r] > tokens[heaviest]) heaviest = r;
  }
  const double mean = sum / tokens.size();
  const double imbalance = mean > 0 ? tokens[heaviest] / mean - 1.0 : 0.0;
  if (comm_->rank() != 0) return;
  std::ostringstream os;
  os << "step " << global_step_ + 1 << ": real tokens per rank: mean " << mean << ", heaviest rank " << heaviest << " "
     << tokens[heaviest] << ", imbalance " << std::fixed << std::setprecision(2) << 100.0 * imbalance << "%";
  log_message(log_info, os.str());
}

StepStats Session::optimizer_step() {
  require_training("bert_optimizer_step");
  return abortable([&] {
    BERT_CHECK(accum_micro_ > 0, Code::invalid_argument,
               "bert_optimizer_step called with no accumulated gradient (call bert_forward_backward first)");
    const auto t0 = Clock::now();
    StepStats s;
    s.learning_rate = schedule_.at(global_step_ + 1);
    // The gradient is a sum over micro-batches and ranks of loss-scaled gradients.
    const double grad_scale = 1.0 / (static_cast<double>(accum_micro_) * comm_->world_size() * scaler_.scale());
    // With CUDA graphs the optimizer step is recorded and replayed too; with dist.shard_optimizer
    // it is driven from the host (its sums are added across ranks there).
    const bool recorded = config_.train.cuda_graphs && !config_.dist.shard_optimizer;
    OptimizerResult r = recorded ? optimizer_->step_recorded(model_->param_data(), model_->grad_data(),
                                                             s.learning_rate, grad_scale)
                                 : optimizer_->step(model_->param_data(), model_->grad_data(), s.learning_rate,
                                                    grad_scale);
    if (r.run == RecordedRun::recorded) {
      log_message(log_info, "step " + std::to_string(global_step_ + 1) + ": recorded the optimizer step as a CUDA graph");
    }
    if (!shard_counts_.empty() && !r.skipped) {  // every rank skips together: the norm is global
      comm_->all_gather(model_->param_data(), shard_counts_);
      ops_->weights_changed();
    }
    s.loss_scale = scaler_.scale();
    scaler_.update(r.skipped);
    ++global_step_;
    s.step = global_step_;
    s.grad_norm = r.grad_norm;
    s.skipped = r.skipped;
    s.micro_batches = accum_micro_;
    s.mlm_loss = accum_mlm_ / accum_micro_;
    s.nsp_loss = accum_nsp_ / accum_micro_;
    s.loss = config_.task.pretraining() ? s.mlm_loss + s.nsp_loss : accum_task_ / accum_micro_;
    s.sequences = accum_sequences_;
    s.tokens = accum_tokens_;
    s.seconds = seconds_since(t0);
    if (r.skipped) {
      std::ostringstream os;
      os << "step " << global_step_ << " skipped: non-finite gradient norm";
      if (config_.train.loss_scale.mode == "dynamic") os << " (loss scale " << s.loss_scale << " -> " << scaler_.scale() << ")";
      log_message(log_warning, os.str());
    }
    discard_accumulation();
    return s;
  });
}

StepStats Session::step(const BatchView* batch) {
  require_training("bert_step");
  BERT_CHECK(batch || train_data_, Code::invalid_argument, "bert_step without a batch draws from the session's own "
             "pretraining data; a ", config_.task.name(), " session trains on batches from the host");
  const auto t0 = Clock::now();
  try {
    run_step_micro_batches(batch);
  } catch (...) {
    discard_accumulation();  // a failed step leaves no partial gradient behind
    throw;
  }
  allreduce();
  StepStats s = optimizer_step();
  s.seconds = seconds_since(t0);
  return s;
}

void Session::run_step_micro_batches(const BatchView* batch) {
  const int micro = config_.train.micro_batch;
  if (batch) {
    BERT_CHECK(batch->batch_size > 0 && batch->batch_size <= micro * config_.train.accumulation_steps,
               Code::invalid_argument, "batch_size ", batch->batch_size, " is outside [1, train.micro_batch × ",
               "train.accumulation_steps = ", micro * config_.train.accumulation_steps, "]");
    for (int begin = 0; begin < batch->batch_size; begin += micro) {
      forward_backward(slice(*batch, begin, std::min(micro, batch->batch_size - begin), config_.task.per_token()),
                       begin + micro >= batch->batch_size);
    }
  } else {
    for (int i = 0; i < config_.train.accumulation_steps; ++i) {
      train_data_->next(host_batch_, micro);
      if (config_.data.balance_ranks) host_batch_ = balance_across_ranks(host_batch_, *comm_);
      forward_backward(view_of(host_batch_), i + 1 == config_.train.accumulation_steps);
    }
  }
}

EvalStats Session::eval(const BatchView* batch) {
  if (!config_.task.pretraining()) {
    BERT_CHECK(batch, Code::invalid_argument, "bert_eval on a ", config_.task.name(),
               " session needs a labelled batch: it has no evaluation set (data.eval_dir holds pretraining shards)");
    return eval_task(*batch);
  }
  return abortable([&] {
    const int micro = config_.train.micro_batch;
    ForwardStats total;
    if (batch) {
      BERT_CHECK(batch->batch_size > 0, Code::invalid_argument, "batch_size must be positive, got ", batch->batch_size);
      for (int begin = 0; begin < batch->batch_size; begin += micro) {
        const BatchView part = slice(*batch, begin, std::min(micro, batch->batch_size - begin), false);
        total += model_->run(inputs(part), DropoutStream{}, nullptr, &abort_);
      }
    } else {
      total = eval_whole_set();
    }
    EvalStats e;
    e.sequences = total.nsp_count;
    e.masked_tokens = total.mlm_count;
    e.mlm_loss = total.mlm_loss();
    e.nsp_loss = total.nsp_loss();
    e.mlm_accuracy = total.mlm_count ? static_cast<double>(total.mlm_correct) / total.mlm_count : 0.0;
    e.nsp_accuracy = total.nsp_count ? static_cast<double>(total.nsp_correct) / total.nsp_count : 0.0;
    return e;
  });
}

// A labelled batch through the fine-tuning head without dropout, in micro-batches; sums and
// counts added over them, so the loss is the whole batch's as Hugging Face computes it.
EvalStats Session::eval_task(const BatchView& batch) {
  return abortable([&] {
    BERT_CHECK(batch.batch_size > 0, Code::invalid_argument, "batch_size must be positive, got ", batch.batch_size);
    const int micro = config_.train.micro_batch;
    std::vector<ModelInputs> parts;  // every micro-batch's labels checked before any runs
    for (int begin = 0; begin < batch.batch_size; begin += micro) {
      parts.push_back(inputs(slice(batch, begin, std::min(micro, batch.batch_size - begin), config_.task.per_token())));
    }
    ForwardStats total;
    for (const ModelInputs& in : parts) total += model_->run(in, DropoutStream{}, nullptr, &abort_);
    // Plain double division: no labelled token (or position) gives NaN, as in Hugging Face.
    auto mean = [](double sum, int64_t count) { return sum / static_cast<double>(count); };
    EvalStats e;
    e.sequences = batch.batch_size;
    e.task_count = total.task_count;
    if (config_.task.type == TaskType::question_answering) {
      e.task_loss = (mean(total.start_loss_sum, total.start_count) + mean(total.end_loss_sum, total.end_count)) / 2;
    } else {
      e.task_loss = mean(total.task_loss_sum, total.task_count);
    }
    e.task_accuracy =
        config_.task.regression() ? std::nan("") : mean(static_cast<double>(total.task_correct), total.task_count);
    return e;
  });
}

// The evaluation set's fixed batches dealt round-robin to the ranks; every rank's per-batch
// sums are gathered and added in batch order, so the result is bit-identical for any rank count.
ForwardStats Session::eval_whole_set() {
  BERT_CHECK(config_.data.source == DataSourceKind::synthetic || !config_.data.eval_dir.empty(), Code::invalid_argument,
             "bert_eval without a batch needs evaluation data: set data.eval_dir");
  if (!eval_set_) eval_set_ = make_eval_set(config_);  // read once; every evaluation reuses it
  nlohmann::json mine = nlohmann::json::array();
  HostBatch hb;
  for (int64_t k = comm_->rank(); k < eval_set_->batches(); k += comm_->world_size()) {
    eval_set_->batch(k, hb);
    ForwardStats f = model_->run(inputs(view_of(hb)), DropoutStream{}, nullptr, &abort_);
    mine.push_back({k, f.mlm_loss_sum, f.mlm_count, f.mlm_correct, f.nsp_loss_sum, f.nsp_count, f.nsp_correct});
  }
  std::vector<nlohmann::json> per_batch(static_cast<size_t>(eval_set_->batches()));
  for (const std::string& text : comm_->allgather_text(mine.dump())) {
    for (const nlohmann::json& b : nlohmann::json::parse(text)) per_batch.at(b[0].get<size_t>()) = b;
  }
  // JSON carries a diverged model's non-finite loss as null.
  auto number = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : std::nan(""); };
  ForwardStats total;
  for (const nlohmann::json& b : per_batch) {
    total.mlm_loss_sum += number(b[1]);
    total.mlm_count += b[2].get<int64_t>();
    total.mlm_correct += b[3].get<int64_t>();
    total.nsp_loss_sum += number(b[4]);
    total.nsp_count += b[5].get<int64_t>();
    total.nsp_correct += b[6].get<int64_t>();
  }
  return total;
}

void Session::infer(const BatchView& batch, ModelOutput what, float* out, size_t count) {
  abortable([&] {
    BERT_CHECK(batch.batch_size > 0, Code::invalid_argument, "batch_size must be positive, got ", batch.batch_size);
    BERT_CHECK(batch.seq_length > 0, Code::invalid_argument, "seq_length must be positive, got ", batch.seq_length);
    const int64_t need = model_->output_elems(what, batch.batch_size, batch.seq_length);
    BERT_CHECK(out != nullptr, Code::invalid_argument, "output buffer is NULL");
    BERT_CHECK(static_cast<int64_t>(count) >= need, Code::invalid_argument, "output buffer holds ", count,
               " floats but ", batch.batch_size, " sequences of length ", batch.seq_length, " need ", need);
    const int micro = config_.train.micro_batch;
    std::vector<ModelInputs> parts;  // all validated before anything is written to out
    for (int begin = 0; begin < batch.batch_size; begin += micro) {
      parts.push_back(inputs(slice(batch, begin, std::min(micro, batch.batch_size - begin), config_.task.per_token()), false));
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      OutputRequest request;
      request.what = what;
      request.host = out + model_->output_elems(what, static_cast<int>(i) * micro, batch.seq_length);
      model_->run(parts[i], DropoutStream{}, nullptr, &abort_, &request);
    }
  });
}

void Session::allreduce_host(float* data, int64_t n, ReduceOp op) {
  BERT_CHECK(data != nullptr || n == 0, Code::invalid_argument, "allreduce data is NULL");
  comm_->allreduce_host(data, n, op);
}

std::string Session::save_checkpoint(const std::string& requested_path) {
  require_training("bert_checkpoint");
  std::string path = requested_path;
  if (path.empty()) {
    BERT_CHECK(!config_.checkpoint.dir.empty(), Code::invalid_argument,
               "no checkpoint path given and checkpoint.dir is not configured");
    path = checkpoint_path(config_.checkpoint.dir, global_step_);
    if (comm_->rank() == 0 && !owns_checkpoint_dir_) {
      check_directory_owner();
      owns_checkpoint_dir_ = true;
    }
  }
  // Written straight from the session's buffers where they are host memory (the CPU backend),
  // else from one host copy each.
  const ParamTable& table = model_->params();
  std::vector<float> weights_copy;
  std::map<std::string, std::vector<float>> slot_copies;
  CheckpointSource c;
  c.config_json = config_json_;
  c.model = tensor_views(table, host_values(model_->param_data(), weights_copy));
  for (const OptimizerSlot& slot : optimizer_->slots()) {
    c.optimizer[slot.name] = tensor_views(table, host_slot(slot.data, slot_copies[slot.name]));
  }
  TrainingState state;
  state.global_step = global_step_;
  state.phase = config_.train.phase;
  state.optimizer_steps = optimizer_->steps_taken();
  state.micro_step = micro_step_;
  state.seed = config_.train.seed;
  state.loss_scale = scaler_.scale();
  state.loss_scale_clean_steps = scaler_.clean_steps();
  state.world_size = comm_->world_size();
  state.run_id = run_id_;
  state.written_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  state.data_cursors = comm_->allgather_text(train_data_ ? train_data_->cursor().dump() : "null");
  c.state = state.to_json();
  if (comm_->rank() == 0) {
    write_checkpoint(path, c);
    if (requested_path.empty()) {
      for (const std::string& old : apply_retention(config_.checkpoint.dir, run_id_, config_.checkpoint.keep,
                                                    config_.checkpoint.keep_every)) {
        log_message(log_info, "retention: removed " + old);
      }
    }
  }
  return path;
}

const float* Session::host_values(const float* values, std::vector<float>& copy) const {
  if (ops_->device() < 0) return values;  // the CPU backend's memory is the host's
  copy.resize(static_cast<size_t>(model_->params().total_elems));
  ops_->download(copy.data(), values, copy.size() * sizeof(float));
  return copy.data();
}

const float* Session::host_slot(float* slot, std::vector<float>& copy) {
  const int64_t n = model_->params().total_elems;
  if (shard_counts_.empty()) return host_values(slot, copy);
  copy.resize(static_cast<size_t>(n));
  auto* whole = static_cast<float*>(ops_->alloc(n * sizeof(float)));
  try {
    ops_->copy(whole + optimizer_->shard_begin(), slot, optimizer_->elems() * sizeof(float));
    comm_->all_gather(whole, shard_counts_);
    ops_->download(copy.data(), whole, n * sizeof(float));
  } catch (...) {
    ops_->release(whole);
    throw;
  }
  ops_->release(whole);
  return copy.data();
}

void Session::check_directory_owner() const {
  const std::string& dir = config_.checkpoint.dir;
  const std::vector<RunCheckpoint> all = list_run_checkpoints(dir);
  const std::string owner = owning_run(all);
  if (owner.empty() || owner == run_id_) return;
  std::string theirs;
  for (const RunCheckpoint& c : all) {
    if (c.readable && c.run_id == owner) theirs += (theirs.empty() ? "" : ", ") + fs::path(c.path).filename().string();
  }
  fail(Code::checkpoint, "checkpoint.dir '", dir, "' holds checkpoints of another run (run id ", owner, ": ", theirs,
       "); this is run ", run_id_, ": continue that run with bert_checkpoint_resume, move them away, or use another "
       "checkpoint.dir");
}

// Settings that give the saved state its meaning: another optimizer's moments or another
// sequence length's data cursor cannot be continued (refused); another batch shape continues the
// same data with a different step size (a warning).
void Session::check_resumable(const std::string& path, const nlohmann::json& saved) const {
  const nlohmann::json now = config_.to_json();
  const std::string saved_optimizer = saved.at("train").at("optimizer").get<std::string>();
  const std::string optimizer = optimizer_name(config_.train.optimizer.kind);
  if (saved_optimizer != optimizer) {
    fail(Code::checkpoint, "checkpoint '", path, "' holds ", saved_optimizer, " optimizer state but train.optimizer = \"",
         optimizer, "\": resume with the same optimizer, or start from its weights with train.init_checkpoint");
  }
  for (const char* key : {"max_seq_length", "max_predictions_per_seq"}) {
    if (saved.at("data").at(key) != now.at("data").at(key)) {
      fail(Code::checkpoint, "checkpoint '", path, "' was written with data.", key, " = ", saved.at("data").at(key).dump(),
           " but this run has ", now.at("data").at(key).dump(),
           ": its data position belongs to other data; start from its weights with train.init_checkpoint");
    }
  }
  for (const char* key : {"micro_batch", "accumulation_steps"}) {
    if (saved.at("train").at(key) != now.at("train").at(key)) {
      log_message(log_warning, "checkpoint '" + path + "' was written with train." + key + " = " +
                                   saved.at("train").at(key).dump() + ", this run has " + now.at("train").at(key).dump() +
                                   ": resuming with a different batch per step");
    }
  }
}

Session::ResumeState Session::prepare_resume(const std::string& path) const {
  BERT_CHECK(!path.empty(), Code::invalid_argument, "checkpoint path is empty");
  // Everything is read and verified into host buffers before the session changes (all-or-nothing).
  const ParamTable& table = model_->params();
  ResumeState r;
  r.path = path;
  r.weights.resize(table.total_elems);
  FlatTensors into{&table, r.weights.data(), {}};
  for (const OptimizerSlot& slot : optimizer_->slots()) {
    std::vector<float>& buffer = r.slots[slot.name];
    buffer.resize(table.total_elems);
    into.optimizer[slot.name] = buffer.data();
  }
  const CheckpointContents c = read_checkpoint_into(path, into);
  r.state = TrainingState::from_json(c.state, path);
  r.config = config_;
  r.config.train.seed = r.state.seed;
  if (r.state.phase != config_.train.phase) {
    fail(Code::checkpoint, "checkpoint '", path, "' is from phase ", r.state.phase, " but train.phase = ",
         config_.train.phase, ": start a new phase with train.init_checkpoint instead of resuming");
  }
  std::string cursor;
  try {
    check_resumable(path, nlohmann::json::parse(c.config_json));
    const std::vector<std::string>& cursors = r.state.data_cursors;
    if (static_cast<int>(cursors.size()) == comm_->world_size()) {
      cursor = cursors.at(comm_->rank());
    } else {
      nlohmann::json saved = nlohmann::json::array();
      for (const std::string& c : cursors) saved.push_back(nlohmann::json::parse(c));
      try {
        cursor = cursor_for_world(saved, comm_->rank(), comm_->world_size()).dump();
      } catch (const Error& e) {
        fail(Code::checkpoint, "checkpoint '", path, "': ", e.what());
      }
      if (comm_->rank() == 0) {
        log_message(log_warning, "checkpoint '" + path + "' was written by " + std::to_string(cursors.size()) +
                                     " ranks, this run has " + std::to_string(comm_->world_size()) +
                                     ": the data continues from the first shard file some rank had not finished "
                                     "(files read partly are read again from their start)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has an incomplete training state: ", e.what());
  }
  // The resumed run continues the checkpoint's random streams (dropout, synthetic data).
  if (train_data_) {
    r.data = make_data_source(r.config, comm_->rank(), comm_->world_size());
    r.data->restore(nlohmann::json::parse(cursor));
  }
  return r;
}

void Session::apply_resume(ResumeState& r) {
  const int64_t n = model_->params().total_elems;
  ops_->upload(model_->param_data(), r.weights.data(), n * sizeof(float));
  upload_slots(r.slots);
  ops_->weights_changed();
  optimizer_->set_steps_taken(r.state.optimizer_steps);
  scaler_.restore(r.state.loss_scale, r.state.loss_scale_clean_steps);
  global_step_ = r.state.global_step;
  micro_step_ = r.state.micro_step;
  train_data_ = std::move(r.data);
  config_ = r.config;
  config_json_ = config_.to_json().dump();
  // The run continues under the checkpoint's id (kLegacyRunId for files written before run ids).
  if (r.state.run_id != run_id_) owns_checkpoint_dir_ = false;
  run_id_ = r.state.run_id;
  discard_accumulation();
}

void Session::upload_slots(const std::map<std::string, std::vector<float>>& slots) {
  const size_t slice_bytes = static_cast<size_t>(optimizer_->elems()) * sizeof(float);
  for (const OptimizerSlot& slot : optimizer_->slots()) {
    ops_->upload(slot.data, slots.at(slot.name).data() + optimizer_->shard_begin(), slice_bytes);
  }
}

void Session::load_checkpoint(const std::string& path) {
  require_training("bert_checkpoint_load");
  ResumeState r = prepare_resume(path);
  apply_resume(r);
}

void Session::load_weights(const std::string& path) {
  BERT_CHECK(!path.empty(), Code::invalid_argument, "checkpoint path is empty");
  CheckpointContents c = read_checkpoint(path);
  load_weights(c, path);
}

void Session::load_weights(CheckpointContents& c, const std::string& path) {
  const ParamTable& table = model_->params();
  std::vector<float> host(table.total_elems);
  ops_->download(host.data(), model_->param_data(), host.size() * sizeof(float));
  if (!config_.task.pretraining()) adapt_to_task(table, host.data(), path, c.model);
  load_tensors(table, c.model, path, "model", host.data());
  ops_->upload(model_->param_data(), host.data(), host.size() * sizeof(float));
  ops_->weights_changed();
  warn_if_other_activation(c, path);
}

// DLE's phase 2 (run_pretraining.py with --phase2): the previous phase's moments carry over while
// the optimizer's step count (so Adam's bias correction), the schedule and the LR start afresh.
void Session::init_optimizer_state(const CheckpointContents& c, const std::string& path) {
  const InitOptimizerState mode = config_.train.init_optimizer_state;
  if (mode == InitOptimizerState::zero) return;
  const nlohmann::json saved = nlohmann::json::parse(c.config_json, nullptr, false);
  const std::string saved_optimizer = saved.is_object() && saved.contains("train") && saved["train"].is_object()
                                          ? saved["train"].value("optimizer", std::string())
                                          : std::string();
  const std::string optimizer = optimizer_name(config_.train.optimizer.kind);
  const bool same_optimizer = saved_optimizer == optimizer;
  if (mode == InitOptimizerState::automatic && !(config_.task.pretraining() && c.has_optimizer() && same_optimizer)) {
    return;
  }
  BERT_CHECK(config_.task.pretraining(), Code::config,
             "config key 'train.init_optimizer_state' = \"load\" applies to pretraining; fine-tuning starts from zero moments");
  BERT_CHECK(c.has_optimizer(), Code::config, "config key 'train.init_optimizer_state' = \"load\": checkpoint '", path,
             "' holds weights only (no optimizer moments)");
  BERT_CHECK(same_optimizer, Code::config, "config key 'train.init_optimizer_state' = \"load\": checkpoint '", path,
             "' holds ", saved_optimizer.empty() ? "unnamed" : saved_optimizer, " moments but train.optimizer = \"",
             optimizer, "\"");
  const ParamTable& table = model_->params();
  std::map<std::string, std::vector<float>> slots;
  for (const OptimizerSlot& slot : optimizer_->slots()) {
    const auto found = c.optimizer.find(slot.name);
    BERT_CHECK(found != c.optimizer.end(), Code::checkpoint, "checkpoint '", path, "' holds no optimizer ", slot.name);
    std::vector<float>& host = slots[slot.name];
    host.resize(table.total_elems);
    load_tensors(table, found->second, path, "optimizer " + slot.name, host.data());
  }
  upload_slots(slots);
  log_message(log_info, "optimizer moments from '" + path + "' (train.init_optimizer_state); step, schedule and LR start afresh");
}

// Weights carry the GELU form they were trained or imported with (e.g. DLE's tanh form); a
// session computing the other form gives slightly different losses, so it is said once here.
void Session::warn_if_other_activation(const CheckpointContents& c, const std::string& path) const {
  const nlohmann::json saved = nlohmann::json::parse(c.config_json, nullptr, false);
  if (!saved.is_object() || !saved.contains("model") || !saved["model"].is_object()) return;
  const std::string act = saved["model"].value("hidden_act", std::string("gelu"));
  if (act != config_.model.hidden_act && (act == "gelu" || config_.model.hidden_act == "gelu")) {  // gelu_new == gelu_tanh
    log_message(log_warning, "checkpoint '" + path + "' records hidden_act '" + act + "' but this session computes '" +
                                 config_.model.hidden_act + "': set model.hidden_act to match its producer");
  }
}

int64_t Session::resume_latest(const std::string& requested_dir) {
  require_training("bert_checkpoint_resume");
  const std::string dir = requested_dir.empty() ? config_.checkpoint.dir : requested_dir;
  BERT_CHECK(!dir.empty(), Code::invalid_argument, "no directory given and checkpoint.dir is not configured");
  if (comm_->rank() == 0) {
    for (const std::string& stale : remove_partial_checkpoints(dir)) {
      log_message(log_warning, "removed partial checkpoint left by an interrupted write: " + stale);
    }
  }
  const std::vector<RunCheckpoint> all = list_run_checkpoints(dir);
  const std::string owner = owning_run(all);
  std::vector<std::pair<std::string, std::string>> invalid;  // newer than the one resumed: path, why it failed
  std::optional<ResumeState> chosen;
  for (auto it = all.rbegin(); it != all.rend() && !chosen; ++it) {
    if (it->readable && it->run_id != owner) {
      log_message(log_warning, "not resuming from " + it->path + ": it belongs to another run (run id " + it->run_id +
                                   ") than the directory's most recent checkpoint (run id " + owner + ")");
      continue;
    }
    try {
      chosen = prepare_resume(it->path);
    } catch (const Error& e) {
      if (e.code() != Code::checkpoint && e.code() != Code::io) throw;
      invalid.emplace_back(it->path, e.what());
    }
  }
  // Every rank has read what it needs before rank 0 moves a file; they agree on what failed.
  const std::vector<std::string> counts = comm_->allgather_text(std::to_string(invalid.size()));
  BERT_CHECK(std::all_of(counts.begin(), counts.end(), [&](const std::string& n) { return n == counts[0]; }),
             Code::distributed, "ranks disagree on which checkpoints of '", dir, "' pass verification");
  if (!invalid.empty()) {
    std::string list;
    for (const auto& [path, why] : invalid) list += "\n  " + why;
    const std::string outcome = chosen ? "the newest valid one is '" + chosen->path + "'" : "none of them is valid";
    if (!config_.checkpoint.discard_invalid) {
      fail(Code::checkpoint, "checkpoint.dir '", dir, "': ", invalid.size(), " checkpoint(s) fail verification and ",
           outcome, "; nothing was resumed and they are kept (a resumed run would write over them). Move them away, ",
           "or set checkpoint.discard_invalid to rename each to <name>.invalid and resume from ",
           chosen ? "the newest valid one" : "step 0", ":", list);
    }
    if (comm_->rank() == 0) {
      for (const auto& [path, why] : invalid) {
        log_message(log_warning, "checkpoint.discard_invalid: moved '" + path + "' to '" + set_aside(path) + "'");
      }
    }
    log_message(log_warning, "checkpoint.dir '" + dir + "': " + std::to_string(invalid.size()) +
                                 " checkpoint(s) fail verification (" + outcome + "):" + list);
  }
  if (!chosen) return -1;
  apply_resume(*chosen);
  log_message(log_info, "resumed from " + chosen->path + " (run id " + run_id_ + ")");
  return global_step_;
}

const ParamEntry& Session::entry(const std::string& name, size_t count) const {
  const ParamTable& table = model_->params();
  int index = table.find(name);
  BERT_CHECK(index >= 0, Code::invalid_argument, "unknown parameter '", name, "'");
  const ParamEntry& e = table.entries[index];
  BERT_CHECK(static_cast<int64_t>(count) == e.elems(), Code::invalid_argument, "parameter '", name, "' has ", e.elems(),
             " elements, but count is ", count);
  return e;
}

void Session::read_param(const std::string& name, float* dst, size_t count, bool gradient) {
  if (gradient) require_training("bert_grad_read");
  const ParamEntry& e = entry(name, count);
  BERT_CHECK(dst != nullptr, Code::invalid_argument, "destination buffer is NULL");
  const float* base = gradient ? model_->grad_data() : model_->param_data();
  ops_->download(dst, base + e.offset, count * sizeof(float));
}

void Session::write_param(const std::string& name, const float* src, size_t count) {
  const ParamEntry& e = entry(name, count);
  BERT_CHECK(src != nullptr, Code::invalid_argument, "source buffer is NULL");
  ops_->upload(model_->param_data() + e.offset, src, count * sizeof(float));
  ops_->weights_changed();
}

}  // namespace bert
