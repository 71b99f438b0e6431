// Parsing and validation of the session config (schema in README.md).
#include "session/session_config.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/json_reader.h"

namespace bert {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

void parse_train(JsonReader r, TrainConfig& t) {
  t.micro_batch = static_cast<int>(r.get_int("micro_batch", t.micro_batch, 1, 1 << 16));
  t.accumulation_steps = static_cast<int>(r.get_int("accumulation_steps", t.accumulation_steps, 1, 1 << 16));
  t.steps = r.get_int("steps", t.steps, 1, std::numeric_limits<int64_t>::max() / 2);
  t.global_batch = r.get_int("global_batch", t.global_batch, 0, std::numeric_limits<int32_t>::max());
  t.accumulation_given = r.has("accumulation_steps");
  t.seed = static_cast<uint64_t>(r.get_int("seed", static_cast<int64_t>(t.seed), 0, std::numeric_limits<int64_t>::max()));
  t.threads = static_cast<int>(r.get_int("threads", t.threads, 0, 4096));
  t.lr = r.get_number("lr", t.lr, 0.0, 1e3);
  t.schedule_steps = r.get_int("schedule_steps", t.steps, 1, std::numeric_limits<int64_t>::max() / 2);
  t.warmup_proportion = r.get_number("warmup_proportion", t.warmup_proportion, 0.0, 1.0);
  if (r.has("warmup_steps")) {
    t.warmup_proportion =
        static_cast<double>(r.get_int("warmup_steps", 0, 0, t.schedule_steps)) / static_cast<double>(t.schedule_steps);
  }
  t.start_warmup_step = r.get_int("start_warmup_step", t.start_warmup_step, -t.schedule_steps, t.schedule_steps);
  t.decay_degree = r.get_number("decay_degree", t.decay_degree, 0.0, 100.0);
  t.end_lr = r.get_number("end_lr", t.end_lr, 0.0, t.lr);
  t.lr_schedule = r.get_choice("lr_schedule", "poly", {"poly", "linear"}) == "linear" ? LrScheduleKind::linear
                                                                                      : LrScheduleKind::poly;
  if (t.lr_schedule == LrScheduleKind::linear && (t.start_warmup_step != 0 || t.end_lr != 0)) {
    fail(Code::config, "config key 'train.", t.start_warmup_step != 0 ? "start_warmup_step" : "end_lr",
         "' does not apply to train.lr_schedule \"linear\" (Hugging Face's: warmup from step 1, decay to 0)");
  }
  OptimizerConfig& o = t.optimizer;
  o.kind = parse_optimizer_kind(r.get_choice("optimizer", optimizer_name(o.kind), {"lamb", "adamw", "sgd"}));
  o.beta1 = r.get_number("beta1", o.beta1, 0.0, 0.999999);
  o.beta2 = r.get_number("beta2", o.beta2, 0.0, 0.999999999);
  o.eps = r.get_number("eps", o.eps, 0.0, 1.0);
  o.weight_decay = r.get_number("weight_decay", o.weight_decay, 0.0, 10.0);
  o.max_grad_norm = r.get_number("max_grad_norm", o.max_grad_norm, 0.0, 1e12);
  o.bias_correction = r.get_bool("bias_correction", o.bias_correction);
  o.nvlamb = r.get_bool("nvlamb", o.nvlamb);
  o.momentum = r.get_number("momentum", o.momentum, 0.0, 1.0);
  t.precision = parse_precision(r.get_choice("precision", precision_name(t.precision), {"fp32", "tf32", "bf16", "fp16"}));
  LossScaleConfig& ls = t.loss_scale;
  ls.mode = r.get_choice("loss_scaling", t.precision == Precision::fp16 ? "dynamic" : "none", {"none", "static", "dynamic"});
  ls.initial = r.get_number("loss_scale", ls.initial, 1e-30, 3.4e38);
  ls.window = r.get_int("loss_scale_window", ls.window, 1, std::numeric_limits<int64_t>::max());
  ls.min = r.get_number("min_loss_scale", ls.min, 1e-30, 3.4e38);
  ls.max = r.get_number("max_loss_scale", std::max(ls.max, ls.initial), ls.min, 3.4e38);
  if (ls.initial < ls.min || ls.initial > ls.max) {
    fail(Code::config, "config key 'train.loss_scale' = ", ls.initial, " is outside [train.min_loss_scale = ", ls.min,
         ", train.max_loss_scale = ", ls.max, "]");
  }
  t.fused_attention = r.get_bool("fused_attention", t.fused_attention);
  t.cuda_graphs = r.get_bool("cuda_graphs", t.cuda_graphs);
  t.debug_sync = r.get_bool("debug_sync", t.debug_sync);
  t.recompute_gelu = r.get_bool("recompute_gelu", t.recompute_gelu);
  t.recompute_attention = r.get_bool("recompute_attention", t.recompute_attention);
  t.log_every = static_cast<int>(r.get_int("log_every", t.log_every, 1, kIntMax));
  t.eval_every = r.get_int("eval_every", t.eval_every, 0, std::numeric_limits<int64_t>::max());
  t.eval_every_samples = r.get_int("eval_every_samples", t.eval_every_samples, 0, std::numeric_limits<int64_t>::max());
  if (t.eval_every > 0 && t.eval_every_samples > 0) {
    fail(Code::config, "config keys 'train.eval_every' and 'train.eval_every_samples' exclude each other");
  }
  t.target_mlm_accuracy = r.get_number("target_mlm_accuracy", t.target_mlm_accuracy, 0.0, 1.0);
  t.dropout = r.get_bool("dropout", t.dropout);
  t.phase = static_cast<int>(r.get_int("phase", t.phase, 1, 2));
  t.init_checkpoint = r.get_string("init_checkpoint", t.init_checkpoint);
  const std::string moments = r.get_choice("init_optimizer_state", "auto", {"auto", "load", "zero"});
  t.init_optimizer_state = moments == "load"   ? InitOptimizerState::load
                           : moments == "zero" ? InitOptimizerState::zero
                                               : InitOptimizerState::automatic;
  r.finish();
}

void parse_data(JsonReader r, DataConfig& d) {
  d.source = r.get_choice("source", r.has("train_dir") ? "hdf5" : "synthetic", {"synthetic", "hdf5"}) == "hdf5"
                 ? DataSourceKind::hdf5
                 : DataSourceKind::synthetic;
  d.train_dir = r.get_string("train_dir", d.train_dir);
  d.eval_dir = r.get_string("eval_dir", d.eval_dir);
  d.format = r.get_choice("format", d.format, {"auto", "dle", "mlperf", "mlperf_packed"});
  d.max_seq_length = static_cast<int>(r.get_int("max_seq_length", d.max_seq_length, 1, 1 << 16));
  d.max_predictions_per_seq =
      static_cast<int>(r.get_int("max_predictions_per_seq", d.max_predictions_per_seq, 0, 1 << 16));
  d.eval_batches = static_cast<int>(r.get_int("eval_batches", d.eval_batches, 1, kIntMax));
  d.eval_samples = r.get_int("eval_samples", d.eval_samples, 0, std::numeric_limits<int64_t>::max());
  d.skip_bad_shards = r.get_bool("skip_bad_shards", d.skip_bad_shards);
  d.unpad = r.get_bool("unpad", d.unpad);
  d.pad_to_multiple = static_cast<int>(r.get_int("pad_to_multiple", d.pad_to_multiple, 0, 1 << 16));
  d.bucket_bins = static_cast<int>(r.get_int("bucket_bins", d.bucket_bins, 0, 1 << 16));
  d.balance_ranks = r.get_bool("balance_ranks", d.balance_ranks);
  d.length_bins = r.get_bool("length_bins", d.length_bins);
  r.finish();
  if (d.length_bins && (d.source != DataSourceKind::hdf5 || d.bucket_bins > 0)) {
    fail(Code::config, "config key 'data.length_bins' needs HDF5 shards in data.train_dir and excludes data.bucket_bins");
  }
  if (d.source == DataSourceKind::hdf5 && d.train_dir.empty()) {
    fail(Code::config, "config key 'data.train_dir' is required when data.source is \"hdf5\"");
  }
}

void parse_checkpoint(JsonReader r, CheckpointConfig& c) {
  c.dir = r.get_string("dir", c.dir);
  c.every = r.get_int("every", c.every, 0, std::numeric_limits<int64_t>::max());
  c.keep = static_cast<int>(r.get_int("keep", c.keep, 1, kIntMax));
  c.keep_every = r.get_int("keep_every", c.keep_every, 0, std::numeric_limits<int64_t>::max());
  c.discard_invalid = r.get_bool("discard_invalid", c.discard_invalid);
  c.continue_on_failure =
      r.get_choice("on_failure", c.continue_on_failure ? "continue" : "stop", {"stop", "continue"}) == "continue";
  r.finish();
}

void parse_dist(JsonReader r, DistConfig& d) {
  d.timeout_s = r.get_number("timeout_s", d.timeout_s, 0.001, 1e7);
  d.clip_per_rank = r.get_bool("clip_per_rank", d.clip_per_rank);
  d.bucket_mb = r.get_number("bucket_mb", d.bucket_mb, 0.0, 1e6);
  d.wire_precision = parse_wire_precision(r.get_choice("wire_precision", wire_precision_name(d.wire_precision), {"fp32", "bf16", "fp16"}));
  d.shard_optimizer = r.get_bool("shard_optimizer", d.shard_optimizer);
  r.finish();
}

void parse_log(JsonReader r, LogConfig& l) {
  l.metrics = r.get_string("metrics", l.metrics);
  l.mlperf = r.get_string("mlperf", l.mlperf);
  l.submission_org = r.get_string("submission_org", l.submission_org);
  l.submission_platform = r.get_string("submission_platform", l.submission_platform);
  l.submission_division = r.get_choice("submission_division", l.submission_division, {"closed", "open"});
  l.submission_status = r.get_choice("submission_status", l.submission_status, {"onprem", "cloud", "research", "preview"});
  r.finish();
}

// What a recorded (CUDA graph) micro-batch needs: every value that changes between replays read
// from device memory, and the shapes fixed per recording.
void check_cuda_graphs(const SessionConfig& c) {
  const char* key = "config key 'train.cuda_graphs' = true";
  if (c.device == "cpu") fail(Code::config, key, " needs device \"cuda\" (the CPU backend computes as it is called)");
  if (!c.task.pretraining()) {
    fail(Code::config, key, " records pretraining micro-batches; the \"", c.task.name(),
         "\" head computes its loss on the host: set it to false");
  }
  if (c.train.debug_sync) {
    fail(Code::config, key, " records work that may not wait for the device, and 'train.debug_sync' waits after "
         "every op: set one of them to false");
  }
}

// "cpu" and "cuda" give -1; "cuda:N" gives N, where N is decimal digits only (no sign, no
// trailing characters) of at most kMaxDeviceDigits digits.
int parse_device_index(const std::string& device) {
  constexpr size_t kMaxDeviceDigits = 4;
  if (device == "cpu" || device == "cuda") return -1;
  const std::string prefix = "cuda:";
  const std::string digits = device.rfind(prefix, 0) == 0 ? device.substr(prefix.size()) : std::string();
  const bool all_digits = !digits.empty() && digits.size() <= kMaxDeviceDigits &&
                          std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!all_digits) {
    fail(Code::config, "config key 'device' = \"", device, "\" is not one of: cpu, cuda, cuda:N (N a device number)");
  }
  return std::stoi(digits);
}

}  // namespace

SessionConfig parse_session_config(const std::string& text) {
  const nlohmann::json root = parse_config_json(text, "config");
  JsonReader r(root, "");
  SessionConfig c;
  if (r.has("model")) c.model = parse_bert_config(r.raw("model"), "model");
  if (r.has("task")) c.task = parse_task_config(r.raw("task"), "task");
  c.inference = r.get_choice("mode", "train", {"train", "inference"}) == "inference";
  parse_train(r.object("train"), c.train);
  parse_data(r.object("data"), c.data);
  parse_checkpoint(r.object("checkpoint"), c.checkpoint);
  parse_dist(r.object("dist"), c.dist);
  parse_log(r.object("log"), c.log);
  c.device = r.get_string("device", c.device);
  c.cuda_index = parse_device_index(c.device);
  r.finish();

  if (c.data.max_seq_length > c.model.max_position_embeddings) {
    fail(Code::config, "config key 'data.max_seq_length' = ", c.data.max_seq_length,
         " is larger than model.max_position_embeddings = ", c.model.max_position_embeddings);
  }
  if (c.data.max_predictions_per_seq >= c.data.max_seq_length) {
    fail(Code::config, "config key 'data.max_predictions_per_seq' = ", c.data.max_predictions_per_seq,
         " must be smaller than data.max_seq_length = ", c.data.max_seq_length);
  }
  if (c.dist.shard_optimizer && c.dist.wire_precision != WirePrecision::fp32) {
    fail(Code::config, "config key 'dist.shard_optimizer' = true reduce-scatters gradients in fp32: set "
         "dist.wire_precision to \"fp32\" (it is \"", wire_precision_name(c.dist.wire_precision), "\")");
  }
  if (c.device == "cpu") {
    if (c.train.precision == Precision::fp16 || c.train.precision == Precision::tf32) {
      fail(Code::config, "config key 'train.precision' = \"", precision_name(c.train.precision),
           "\" needs device \"cuda\"; the CPU backend computes in fp32 or, on CPUs with native bf16, \"bf16\"");
    }
    if (c.train.fused_attention) {
      fail(Code::config, "config key 'train.fused_attention' = true needs device \"cuda\" (cuDNN)");
    }
  }
  if (c.train.cuda_graphs) check_cuda_graphs(c);
  return c;
}

nlohmann::json SessionConfig::to_json() const {
  const OptimizerConfig& o = train.optimizer;
  return {
      {"model", model.to_json()},
      {"task", task.to_json()},
      {"mode", inference ? "inference" : "train"},
      {"train",
       {{"micro_batch", train.micro_batch},
        {"accumulation_steps", train.accumulation_steps},
        {"global_batch", train.global_batch},
        {"steps", train.steps},
        {"seed", train.seed},
        {"threads", train.threads},
        {"lr", train.lr},
        {"warmup_proportion", train.warmup_proportion},
        {"schedule_steps", train.schedule_steps},
        {"start_warmup_step", train.start_warmup_step},
        {"end_lr", train.end_lr},
        {"lr_schedule", train.lr_schedule == LrScheduleKind::linear ? "linear" : "poly"},
        {"decay_degree", train.decay_degree},
        {"optimizer", optimizer_name(o.kind)},
        {"beta1", o.beta1},
        {"beta2", o.beta2},
        {"eps", o.eps},
        {"weight_decay", o.weight_decay},
        {"max_grad_norm", o.max_grad_norm},
        {"bias_correction", o.bias_correction},
        {"nvlamb", o.nvlamb},
        {"momentum", o.momentum},
        {"precision", precision_name(train.precision)},
        {"loss_scaling", train.loss_scale.mode},
        {"loss_scale", train.loss_scale.initial},
        {"loss_scale_window", train.loss_scale.window},
        {"min_loss_scale", train.loss_scale.min},
        {"max_loss_scale", train.loss_scale.max},
        {"fused_attention", train.fused_attention},
        {"cuda_graphs", train.cuda_graphs},
        {"debug_sync", train.debug_sync},
        {"recompute_gelu", train.recompute_gelu},
        {"recompute_attention", train.recompute_attention},
        {"log_every", train.log_every},
        {"eval_every", train.eval_every},
        {"eval_every_samples", train.eval_every_samples},
        {"target_mlm_accuracy", train.target_mlm_accuracy},
        {"dropout", train.dropout},
        {"phase", train.phase},
        {"init_checkpoint", train.init_checkpoint},
        {"init_optimizer_state", train.init_optimizer_state == InitOptimizerState::load   ? "load"
                                 : train.init_optimizer_state == InitOptimizerState::zero ? "zero"
                                                                                          : "auto"}}},
      {"data",
       {{"source", data.source == DataSourceKind::hdf5 ? "hdf5" : "synthetic"},
        {"train_dir", data.train_dir},
        {"eval_dir", data.eval_dir},
        {"format", data.format},
        {"max_seq_length", data.max_seq_length},
        {"max_predictions_per_seq", data.max_predictions_per_seq},
        {"eval_batches", data.eval_batches},
        {"eval_samples", data.eval_samples},
        {"skip_bad_shards", data.skip_bad_shards},
        {"unpad", data.unpad},
        {"pad_to_multiple", data.pad_to_multiple},
        {"bucket_bins", data.bucket_bins},
        {"balance_ranks", data.balance_ranks},
        {"length_bins", data.length_bins}}},
      {"checkpoint",
       {{"dir", checkpoint.dir},
        {"every", checkpoint.every},
        {"keep", checkpoint.keep},
        {"keep_every", checkpoint.keep_every},
        {"discard_invalid", checkpoint.discard_invalid},
        {"on_failure", checkpoint.continue_on_failure ? "continue" : "stop"}}},
      {"dist",
       {{"timeout_s", dist.timeout_s},
        {"clip_per_rank", dist.clip_per_rank},
        {"bucket_mb", dist.bucket_mb},
        {"shard_optimizer", dist.shard_optimizer},
        {"wire_precision", wire_precision_name(dist.wire_precision)}}},
      {"log",
       {{"metrics", log.metrics},
        {"mlperf", log.mlperf},
        {"submission_org", log.submission_org},
        {"submission_platform", log.submission_platform},
        {"submission_division", log.submission_division},
        {"submission_status", log.submission_status}}},
      {"device", device},
  };
}

}  // namespace bert
