// bert-train: pretrains BERT from one JSON config, or from several run one after the other
// (phase 1 then phase 2: each later phase starts from the previous phase's final weights with a
// fresh step, schedule and data cursor), through the C ABI. It prints a progress line
// (step/total, loss, lr, sequences/s, ETA), evaluates the whole eval set every train.eval_every
// steps (or train.eval_every_samples samples) and at the end, stops a phase once an evaluation
// reaches train.target_mlm_accuracy, writes periodic and final checkpoints, a metrics log
// (log.metrics) and an MLPerf log (log.mlperf) on rank 0 (losses in the progress line and logs are
// the world's: each step's loss averaged over the ranks), and exits non-zero with the engine's
// message on any error. SIGTERM/SIGINT make it checkpoint at the next step boundary and exit;
// --resume continues from the newest valid checkpoint of the run that owns checkpoint.dir; a fresh
// run refuses a directory holding another run's checkpoints unless --overwrite (moved aside);
// --steps-this-run N checkpoints and exits after N steps of this invocation without changing the
// schedule. --plan [--world N] trains nothing: it prints what the recipes would do on N ranks
// (run_plan.h).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "ckpt/tf_names.h"
#include "command_line.h"
#include "metrics_log.h"
#include "mlperf_log.h"
#include "run_dir.h"
#include "run_plan.h"
#include "tool_common.h"

namespace {

using bert_tools::failed;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t stop_signal = 0;

void on_stop_signal(int sig) { stop_signal = sig; }

constexpr const char* kUsage =
    "usage: bert-train CONFIG.json [PHASE2.json ...] [--steps N] [--steps-this-run N] [--output FILE.h5]\n"
    "                  [--resume [--discard-invalid] | --overwrite] [--loss-log FILE] [--quiet]\n"
    "       bert-train --plan CONFIG.json [PHASE2.json ...] [--world N] [--steps N]\n"
    "  Trains for train.steps (or N) optimizer steps per config. Several configs run as phases:\n"
    "  each later one starts from the previous one's final checkpoint (its train.init_checkpoint\n"
    "  unless set) with its LAMB moments (train.init_optimizer_state) and a fresh step, schedule\n"
    "  and data cursor. With checkpoint.dir set, writes\n"
    "  <dir>/ckpt_<step>.h5 every checkpoint.every steps and on SIGTERM/SIGINT; --resume\n"
    "  continues from the newest valid one of the run that wrote the directory last (a phase whose\n"
    "  final checkpoint exists is skipped, a finished run is not trained again). A checkpoint\n"
    "  that fails verification stops --resume, naming it; --discard-invalid renames such files to\n"
    "  <name>.invalid and resumes from the newest valid one. A periodic checkpoint that cannot be\n"
    "  written stops the run (checkpoint.on_failure: \"continue\" trains on). A checkpoint.dir\n"
    "  belongs to one run: without --resume, a directory holding checkpoints is refused;\n"
    "  --overwrite moves them to <dir>/overwritten-<time>/. log.mlperf holds one run: a new run\n"
    "  moves an earlier log aside, --resume continues the run's own log.\n"
    "  --steps-this-run stops (checkpoint written, exit 0) after N steps of this invocation.\n"
    "  The final checkpoint of a phase goes to <checkpoint.dir>/final.h5 (bert_final.h5 without\n"
    "  a dir; --output FILE.h5 for the last phase). train.eval_every / eval_every_samples evaluate\n"
    "  during training; train.target_mlm_accuracy ends the phase once reached (exit 0).\n"
    "  --loss-log appends 'step loss' per step with every digit of the float (rank 0 writes it;\n"
    "  under mpirun the loss is the mean of the ranks' losses).\n"
    "  --plan trains nothing: it prints, for N ranks (default 1), the batch split, steps and\n"
    "  samples, the learning rate at a few steps, the evaluation and checkpoint points, the memory\n"
    "  per rank (the engine's own accounting, no model allocated, no data read) and, for a CUDA\n"
    "  recipe, the cost model's predicted step time and time to train; then a JSON line per phase.\n"
    "exit status:\n"
    "  0    every phase completed (or reached its target), or --steps-this-run stopped it with a\n"
    "       checkpoint written; also a --resume of a run that had already finished\n"
    "  1    the run failed: a training, evaluation or distributed error, or a checkpoint (periodic\n"
    "       or final) that could not be written or resumed\n"
    "  2    bad command line or config (nothing trained)\n"
    "  3    the run ended its steps without reaching train.target_mlm_accuracy (final checkpoint\n"
    "       written; a scheduler may retry with another seed)\n"
    "  128+N  stopped by signal N (SIGTERM, SIGINT), checkpoint written when checkpoint.dir is set\n";

void log_to_stderr(bert_log_level level, const char* message, void*) {
  if (level >= BERT_LOG_INFO) std::fprintf(stderr, "[bertengine] %s\n", message);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::vector<std::string> configs;
  std::string output, loss_log_path;
  long long steps_override = -1;
  long long steps_this_run = -1;  // -1: no limit
  bool quiet = false, resume = false, overwrite = false, discard_invalid = false;
  bool plan = false;
  int world = 0;  // --world: ranks to plan for (0: not given)
};

// bert-train's exit status when a phase ends its steps short of train.target_mlm_accuracy.
constexpr int kExitTargetNotReached = 3;

enum class Outcome { completed, target_reached, target_missed, step_budget_spent, signalled, failed };

// One phase: a session from one config, trained to its end, its target, or this run's budget.
class PhaseRun {
 public:
  // `notes`: lines rank 0 prints once the session knows which rank this is.
  PhaseRun(const Options& options, const std::string& config_path, std::string text, std::string output,
           FILE*& loss_log, long long& steps_left, std::string notes)
      : options_(options), config_path_(config_path), text_(std::move(text)), output_(std::move(output)),
        loss_log_(loss_log), steps_left_(steps_left), notes_(std::move(notes)) {}
  ~PhaseRun() { bert_session_destroy(session_); }

  Outcome run();
  int exit_code() const { return exit_code_; }
  bool leader() const { return leader_; }

 private:
  bool setup();
  bool leader_setup();
  bool open_mlperf_log();
  bool eval_due(long long step) const;
  bool evaluate(long long step, bert_eval_result& e);
  void log_mlperf_header();
  void log_progress(long long step, const bert_step_result& r);
  Outcome finish(Outcome outcome, long long step);
  Outcome fail(int code) {
    exit_code_ = code;
    return Outcome::failed;
  }

  const Options& options_;
  const std::string config_path_;
  std::string text_, output_;
  FILE*& loss_log_;  // opened by rank 0 at its first phase
  long long& steps_left_;
  const std::string notes_;

  bert_session* session_ = nullptr;
  nlohmann::json resolved_;
  bool leader_ = true, tty_ = false, has_eval_data_ = false;
  int world_ = 1, phase_ = 1, log_every_ = 10;
  long long total_ = 0, first_step_ = 1, every_ = 0, global_batch_ = 0;
  long long eval_every_ = 0, eval_every_samples_ = 0;
  double target_ = 0;
  bool continue_on_failed_checkpoint_ = false;
  std::string dir_;
  int exit_code_ = 0;
  bert_tools::MetricsLog metrics_;
  bert_tools::MlperfLog mlperf_;
  Clock::time_point run_start_;
  // Progress-line window.
  double loss_sum_ = 0, mlm_sum_ = 0, nsp_sum_ = 0, window_seconds_ = 0;
  long long window_steps_ = 0, window_sequences_ = 0, window_skipped_ = 0;
  double window_tokens_ = 0;
  long long block_first_samples_ = 0, block_samples_ = 0;
  bool in_block_ = false;

  void block_start();
  void block_stop(long long samples);
};

// MLPerf blocks: the training between two evaluations.
void PhaseRun::block_start() {
  mlperf_.event("block_start", nullptr,
                {{"first_epoch_num", block_first_samples_}, {"epoch_count", block_samples_}, {"samples_count", block_first_samples_}});
  in_block_ = true;
}

void PhaseRun::block_stop(long long samples) {
  if (!in_block_) return;
  mlperf_.event("block_stop", nullptr, {{"first_epoch_num", block_first_samples_}, {"samples_count", samples}});
  in_block_ = false;
}

// Rank 0's part of the setup: --overwrite's move, the log files.
bool PhaseRun::leader_setup() {
  if (options_.overwrite && !dir_.empty()) {
    const std::vector<std::string> files = bert_tools::run_files(dir_);
    if (!files.empty()) {
      std::string error;
      const std::string aside = bert_tools::move_aside(dir_, files, &error);
      if (aside.empty()) {
        std::fprintf(stderr, "error: --overwrite: %s\n", error.c_str());
        return false;
      }
      std::printf("--overwrite: moved %zu files of the previous run from %s to %s (%s)\n", files.size(), dir_.c_str(),
                  aside.c_str(), bert_tools::join_names(files).c_str());
    }
  }
  if (!options_.loss_log_path.empty() && !loss_log_ && !(loss_log_ = std::fopen(options_.loss_log_path.c_str(), "a"))) {
    std::fprintf(stderr, "error: --loss-log: cannot open '%s' for writing\n", options_.loss_log_path.c_str());
    return false;
  }
  const std::string metrics = resolved_["log"]["metrics"].get<std::string>();
  if (!metrics_.open(metrics)) {
    std::fprintf(stderr, "error: config key 'log.metrics': cannot open '%s' for writing\n", metrics.c_str());
    return false;
  }
  return true;
}

// MLPerf's init_start precedes building the model, so rank 0 (as its launcher numbers it) opens
// log.mlperf before the session exists: a fresh run starts a new log, --resume continues the
// run's own (one header for all its parts).
bool PhaseRun::open_mlperf_log() {
  if (bert_tools::launcher_rank() != 0) return true;
  const nlohmann::json config = nlohmann::json::parse(text_, nullptr, false);  // the session reports bad JSON
  if (!config.is_object() || !config.contains("log") || !config["log"].is_object()) return true;
  const nlohmann::json path = config["log"].value("mlperf", nlohmann::json());
  if (!path.is_string()) return true;
  std::string moved, error;
  if (!mlperf_.open(path.get<std::string>(), options_.resume, &moved, &error)) {
    std::fprintf(stderr, "error: config key 'log.mlperf': %s\n", error.c_str());
    return false;
  }
  if (!moved.empty()) std::printf("log.mlperf: the previous run's log was moved to %s\n", moved.c_str());
  if (!mlperf_.continued()) {
    // The page cache is the launcher's to clear (it needs root); the key records that it was not done here.
    mlperf_.event("cache_clear", false);
    mlperf_.event("init_start");
  }
  return true;
}

bool PhaseRun::setup() {
  if (!options_.quiet) bert_set_log_callback(log_to_stderr, nullptr);
  if (!open_mlperf_log()) {
    exit_code_ = 2;
    return false;
  }
  if (failed(bert_session_create(text_.c_str(), nullptr, &session_), config_path_.c_str())) return false;
  int rank = 0;
  bert_session_rank(session_, &rank, &world_, nullptr);
  leader_ = rank == 0;  // under mpirun/srun only rank 0 prints progress and writes logs
  if (leader_) std::fputs(notes_.c_str(), stdout);
  resolved_ = nlohmann::json::parse(bert_session_config(session_));
  const nlohmann::json& t = resolved_["train"];
  total_ = t["steps"].get<long long>();
  phase_ = t["phase"].get<int>();
  log_every_ = t["log_every"].get<int>();
  eval_every_ = t["eval_every"].get<long long>();
  eval_every_samples_ = t["eval_every_samples"].get<long long>();
  target_ = t["target_mlm_accuracy"].get<double>();
  global_batch_ = static_cast<long long>(t["micro_batch"].get<int>()) * t["accumulation_steps"].get<int>() * world_;
  every_ = resolved_["checkpoint"]["every"].get<long long>();
  dir_ = resolved_["checkpoint"]["dir"].get<std::string>();
  continue_on_failed_checkpoint_ = resolved_["checkpoint"]["on_failure"] == "continue";
  has_eval_data_ = resolved_["data"]["source"] == "synthetic" || !resolved_["data"]["eval_dir"].get<std::string>().empty();
  if (output_.empty()) output_ = dir_.empty() ? "bert_final.h5" : dir_ + "/final.h5";
  tty_ = isatty(fileno(stdout));
  if (target_ > 0 && !has_eval_data_) {
    std::fprintf(stderr, "error: %s: train.target_mlm_accuracy needs evaluation data: set data.eval_dir\n",
                 config_path_.c_str());
    exit_code_ = 2;
    return false;
  }
  if ((options_.resume || options_.steps_this_run >= 0) && dir_.empty()) {
    std::fprintf(stderr, "error: %s: %s needs checkpoint.dir in the config\n", config_path_.c_str(),
                 options_.resume ? "--resume" : "--steps-this-run");
    exit_code_ = 2;
    return false;
  }
  if (leader_ && !leader_setup()) exit_code_ = 2;
  // Every rank learns whether rank 0's part succeeded, so none goes on to wait for the others.
  float leader_failed = exit_code_ != 0 ? 1.0f : 0.0f;
  if (world_ > 1 && failed(bert_allreduce_host(session_, &leader_failed, 1, BERT_REDUCE_MAX), "setup")) return false;
  if (leader_failed > 0) {
    exit_code_ = 2;
    return false;
  }
  log_mlperf_header();
  if (options_.resume) {
    int64_t resumed = -1;
    if (failed(bert_checkpoint_resume(session_, nullptr, &resumed), "resume")) {
      if (leader_ && std::strstr(bert_last_error(), "checkpoint.discard_invalid")) {
        std::fprintf(stderr, "(bert-train --resume --discard-invalid sets checkpoint.discard_invalid)\n");
      }
      return false;
    }
    if (resumed >= 0) {
      if (leader_) std::printf("resumed from step %lld\n", static_cast<long long>(resumed));
      first_step_ = resumed + 1;
    } else if (leader_) {
      std::printf("no valid checkpoint in %s: starting from step 0\n", dir_.c_str());
    }
  }
  metrics_.metadata("loss", {{"unit", "nat"}});
  metrics_.metadata("sequences_per_second", {{"unit", "sequences/s"}});
  metrics_.metadata("tokens_per_second", {{"unit", "tokens/s"}});
  metrics_.metadata("eval_mlm_accuracy", {{"unit", "fraction"}});
  metrics_.metadata("e2e_train_time", {{"unit", "s"}});
  return true;
}

// The keys and hyperparameters MLPerf Training's BERT rules require before run_start.
void PhaseRun::log_mlperf_header() {
  if (!mlperf_.enabled() || mlperf_.continued()) return;
  const nlohmann::json& t = resolved_["train"];
  const nlohmann::json& log = resolved_["log"];
  std::string platform = log["submission_platform"].get<std::string>();
  if (platform.empty()) platform = std::to_string(world_) + "x" + resolved_["device"].get<std::string>();
  mlperf_.event("submission_benchmark", "bert");
  mlperf_.event("submission_org", log["submission_org"]);
  mlperf_.event("submission_division", log["submission_division"]);
  mlperf_.event("submission_status", log["submission_status"]);
  mlperf_.event("submission_platform", platform);
  mlperf_.event("seed", t["seed"]);
  mlperf_.event("global_batch_size", global_batch_);
  mlperf_.event("d_batch_size", t["micro_batch"]);
  mlperf_.event("gradient_accumulation_steps", t["accumulation_steps"]);
  mlperf_.event("max_sequence_length", resolved_["data"]["max_seq_length"]);
  mlperf_.event("max_predictions_per_seq", resolved_["data"]["max_predictions_per_seq"]);
  mlperf_.event("opt_name", t["optimizer"]);
  mlperf_.event("opt_base_learning_rate", t["lr"]);
  mlperf_.event("opt_lamb_epsilon", t["eps"]);
  mlperf_.event("opt_lamb_beta_1", t["beta1"]);
  mlperf_.event("opt_lamb_beta_2", t["beta2"]);
  mlperf_.event("opt_lamb_weight_decay_rate", t["weight_decay"]);
  const long long schedule_steps = t["schedule_steps"].get<long long>();
  mlperf_.event("opt_learning_rate_training_steps", schedule_steps);
  const long long warmup = std::llround(t["warmup_proportion"].get<double>() * static_cast<double>(schedule_steps));
  mlperf_.event("opt_learning_rate_warmup_steps", warmup);
  mlperf_.event("num_warmup_steps", warmup);
  mlperf_.event("start_warmup_step", t["start_warmup_step"]);
  mlperf_.event("opt_epsilon", t["eps"]);
  mlperf_.event("opt_lamb_learning_rate_decay_poly_power", t["decay_degree"]);
  // Every initialised tensor by its TensorFlow name, as MLPerf's reference logs them (ruleset
  // 1.1.0 checks the list is BERT-large's).
  size_t count = 0;
  bert_param_count(session_, &count);
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    int ndim = 0;
    int64_t shape[BERT_MAX_PARAM_DIMS];
    if (bert_param_info(session_, i, &name, &ndim, shape) == BERT_OK) {
      mlperf_.event("weights_initialization", nullptr, {{"tensor", bert::tf_bert_name(name)}});
    }
  }
  mlperf_.event("init_stop");
}

bool PhaseRun::eval_due(long long step) const {
  return has_eval_data_ && bert_tools::evaluation_due(step, eval_every_, eval_every_samples_, global_batch_);
}

bool PhaseRun::evaluate(long long step, bert_eval_result& e) {
  const long long samples = step * global_batch_;
  block_stop(samples);
  mlperf_.event("eval_start", nullptr, {{"epoch_num", samples}});
  bert_eval_result_init(&e);
  const auto t0 = Clock::now();
  if (failed(bert_eval(session_, nullptr, &e), "bert_eval")) return false;
  const double seconds = seconds_since(t0);
  mlperf_.event("eval_stop", nullptr, {{"epoch_num", samples}});
  if (!mlperf_.logged("eval_samples")) mlperf_.event("eval_samples", e.sequences);
  mlperf_.event("eval_accuracy", e.mlm_accuracy, {{"epoch_num", samples}});
  metrics_.log(nlohmann::json::array({phase_, step}),
               {{"samples", samples},
                {"eval_mlm_accuracy", e.mlm_accuracy},
                {"eval_mlm_loss", e.mlm_loss},
                {"eval_nsp_accuracy", e.nsp_accuracy},
                {"eval_nsp_loss", e.nsp_loss},
                {"eval_sequences", e.sequences},
                {"eval_seconds", seconds}});
  if (leader_) {
    std::printf("%seval: step %lld: %lld sequences, %lld masked tokens: mlm accuracy %.4f, mlm loss %.4f, nsp accuracy %.4f (%.1f s)\n",
                tty_ ? "\n" : "", step, static_cast<long long>(e.sequences), static_cast<long long>(e.masked_tokens),
                e.mlm_accuracy, e.mlm_loss, e.nsp_accuracy, seconds);
    std::fflush(stdout);
  }
  block_first_samples_ = samples;
  return true;
}

void PhaseRun::log_progress(long long step, const bert_step_result& r) {
  loss_sum_ += r.loss;
  mlm_sum_ += r.mlm_loss;
  nsp_sum_ += r.nsp_loss;
  window_seconds_ += r.step_seconds;
  window_sequences_ += r.sequences;
  window_tokens_ += r.tokens_per_second * r.step_seconds;
  window_skipped_ += r.skipped;
  ++window_steps_;
  const bool window_end = step % log_every_ == 0 || step == total_;
  if (window_end) {
    // Throughput of the world: this rank's measured rate times the number of ranks.
    const double seq_per_s = window_seconds_ > 0 ? world_ * window_sequences_ / window_seconds_ : 0.0;
    const double tok_per_s = window_seconds_ > 0 ? world_ * window_tokens_ / window_seconds_ : 0.0;
    metrics_.log(nlohmann::json::array({phase_, step}),
                 {{"samples", step * global_batch_},
                  {"loss", loss_sum_ / window_steps_},
                  {"mlm_loss", mlm_sum_ / window_steps_},
                  {"nsp_loss", nsp_sum_ / window_steps_},
                  {"learning_rate", r.learning_rate},
                  {"loss_scale", r.loss_scale},
                  {"skipped", window_skipped_},
                  {"sequences_per_second", seq_per_s},
                  {"tokens_per_second", tok_per_s}});
  }
  if (!options_.quiet && leader_ && (window_end || tty_)) {
    const double elapsed = seconds_since(run_start_);
    const double eta = elapsed / static_cast<double>(step - first_step_ + 1) * static_cast<double>(total_ - step);
    std::printf("%sstep %lld/%lld  loss %.4f (mlm %.4f nsp %.4f)  lr %.3e  %.1f seq/s  ETA %s%s", tty_ ? "\r" : "", step,
                total_, loss_sum_ / window_steps_, mlm_sum_ / window_steps_, nsp_sum_ / window_steps_, r.learning_rate,
                r.sequences_per_second, bert_tools::format_duration(eta).c_str(), tty_ && !window_end ? "   " : "\n");
    std::fflush(stdout);
  }
  if (step % log_every_ == 0) {
    loss_sum_ = mlm_sum_ = nsp_sum_ = window_seconds_ = window_tokens_ = 0;
    window_steps_ = window_sequences_ = window_skipped_ = 0;
  }
}

Outcome PhaseRun::run() {
  if (!setup()) return fail(exit_code_ ? exit_code_ : 1);
  run_start_ = Clock::now();
  if (!mlperf_.logged("run_start")) mlperf_.event("run_start");
  block_first_samples_ = (first_step_ - 1) * global_batch_;
  block_samples_ = eval_every_ > 0 ? eval_every_ * global_batch_
                   : eval_every_samples_ > 0 ? eval_every_samples_ : (total_ - first_step_ + 1) * global_batch_;
  block_start();

  bert_step_result r;
  bert_step_result_init(&r);
  bert_eval_result e;
  bert_eval_result_init(&e);
  bool evaluated_last = false;
  for (long long step = first_step_; step <= total_; ++step) {
    if (failed(bert_step(session_, nullptr, &r), "bert_step")) return fail(1);
    if (world_ > 1) {  // the world's loss: every rank's loss of this step, averaged
      float losses[3] = {r.loss, r.mlm_loss, r.nsp_loss};
      if (failed(bert_allreduce_host(session_, losses, 3, BERT_REDUCE_MEAN), "mean loss")) return fail(1);
      r.loss = losses[0];
      r.mlm_loss = losses[1];
      r.nsp_loss = losses[2];
    }
    if (loss_log_ && leader_) {
      std::fprintf(loss_log_, "%lld %.9g\n", step, r.loss);
      std::fflush(loss_log_);
    }
    if (r.skipped && leader_) {
      std::printf("%sstep %lld skipped: gradients overflowed at loss scale %g\n", tty_ ? "\n" : "", step,
                  static_cast<double>(r.loss_scale));
    }
    log_progress(step, r);
    evaluated_last = false;
    if (eval_due(step)) {
      if (!evaluate(step, e)) return fail(1);
      evaluated_last = true;
      if (target_ > 0 && e.mlm_accuracy >= target_) return finish(Outcome::target_reached, step);
      if (step != total_) block_start();
    }
    if (steps_left_ > 0) --steps_left_;
    const bool stopping = stop_signal != 0;
    const bool budget_spent = steps_left_ == 0 && step != total_;
    if (!dir_.empty() && ((every_ > 0 && step % every_ == 0 && step != total_) || stopping || budget_spent)) {
      if (failed(bert_checkpoint(session_, nullptr), "checkpoint")) {
        // A failed save keeps earlier checkpoints; the run stops unless told to train on without one.
        if (!stopping && !budget_spent && continue_on_failed_checkpoint_) {
          if (leader_) std::fprintf(stderr, "warning: checkpoint.on_failure is \"continue\": training goes on\n");
          continue;
        }
        if (leader_) {
          std::fprintf(stderr, "error: stopping at step %lld: the checkpoint could not be written (earlier checkpoints in "
                       "%s are intact; rerun with --resume once the cause is fixed)\n", step, dir_.c_str());
        }
        return fail(1);
      }
    }
    if (stopping || budget_spent) block_stop(step * global_batch_);  // the next part of the run starts the next block
    if (stopping) {
      if (leader_) {
        std::printf("\nstopped by signal %d at step %lld%s\n", static_cast<int>(stop_signal), step,
                    dir_.empty() ? " (no checkpoint.dir: state not saved)" : "; checkpoint written");
      }
      exit_code_ = 128 + stop_signal;
      return Outcome::signalled;
    }
    if (budget_spent) {
      if (leader_) {
        std::printf("stopped after %lld steps of this run at step %lld/%lld; checkpoint written to %s (rerun with --resume)\n",
                    options_.steps_this_run, step, total_, dir_.c_str());
      }
      return Outcome::step_budget_spent;
    }
  }
  if (has_eval_data_ && !evaluated_last && !evaluate(total_, e)) return fail(1);
  if (target_ <= 0) return finish(Outcome::completed, total_);
  return finish(e.mlm_accuracy >= target_ ? Outcome::target_reached : Outcome::target_missed, total_);
}

// The end of a phase: final checkpoint, run_stop and the time to train.
Outcome PhaseRun::finish(Outcome outcome, long long step) {
  const double time_to_train = seconds_since(run_start_);
  const bool success = outcome != Outcome::target_missed;
  if (!mlperf_.logged("eval_samples")) mlperf_.event("eval_samples", 0);
  mlperf_.event("train_samples", step * global_batch_);
  block_stop(step * global_batch_);
  mlperf_.event("run_stop", nullptr, {{"status", success ? "success" : "aborted"}, {"epoch_num", step * global_batch_}});
  metrics_.log(nlohmann::json::array(), {{"e2e_train_time", time_to_train},
                                          {"steps", step},
                                          {"samples", step * global_batch_},
                                          {"target_reached", outcome == Outcome::target_reached}});
  if (failed(bert_checkpoint(session_, output_.c_str()), output_.c_str())) return fail(1);
  if (leader_) {
    if (outcome == Outcome::target_reached) {
      std::printf("target mlm accuracy %.4f reached at step %lld/%lld (%lld samples): time to train %.1f s\n", target_,
                  step, total_, step * global_batch_, time_to_train);
    } else if (outcome == Outcome::target_missed) {
      std::printf("target mlm accuracy %.4f not reached in %lld steps (exit status %d)\n", target_, total_,
                  kExitTargetNotReached);
    }
    std::printf("done: %lld steps in %s, checkpoint written to %s\n", step,
                bert_tools::format_duration(time_to_train).c_str(), output_.c_str());
  }
  if (outcome == Outcome::target_missed) exit_code_ = kExitTargetNotReached;
  return outcome;
}

bool parse_args(int argc, char** argv, Options& o) {
  using Args = bert_tools::CommandLine;
  const Args args(
      "bert-train", kUsage, argc, argv, 1,
      {.with_value = {"--steps", "--steps-this-run", "--output", "--loss-log", "--world"},
       .flags = {"--resume", "--overwrite", "--discard-invalid", "--quiet", "--plan"},
       .min_positional = 1,
       .max_positional = Args::kUnbounded,
       .positional_name = "CONFIG.json files"});
  o.configs = args.positional();
  o.steps_override = args.integer("--steps", -1, 1, 1LL << 40);
  o.steps_this_run = args.integer("--steps-this-run", -1, 0, 1LL << 40);
  o.output = args.text("--output");
  o.loss_log_path = args.text("--loss-log");
  o.world = static_cast<int>(args.integer("--world", 0, 1, 1 << 20));
  o.resume = args.flag("--resume");
  o.overwrite = args.flag("--overwrite");
  o.discard_invalid = args.flag("--discard-invalid");
  o.quiet = args.flag("--quiet");
  o.plan = args.flag("--plan");
  if (o.discard_invalid && !o.resume) {
    std::fprintf(stderr, "error: --discard-invalid applies to --resume: give both\n");
    return false;
  }
  if (o.world > 0 && !o.plan) {
    std::fprintf(stderr, "error: --world applies to --plan (a run's world size is its launcher's): give both\n");
    return false;
  }
  if (o.resume && o.overwrite) {
    std::fprintf(stderr, "error: --resume continues the run in checkpoint.dir, --overwrite starts a new one: give one of them\n");
    return false;
  }
  return true;
}

// The config text of phase `index`: --steps and --discard-invalid applied, and a later phase
// starting from the previous phase's final checkpoint unless it names its own train.init_checkpoint.
std::string phase_config(const Options& o, const std::string& path, const std::string& previous_final) {
  std::string text = bert_tools::read_file_or_exit(path);
  if (o.steps_override <= 0 && previous_final.empty() && !o.discard_invalid) return text;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return text;  // the session reports the JSON error with its position
  if (o.steps_override > 0) j["train"]["steps"] = o.steps_override;
  if (o.discard_invalid) j["checkpoint"]["discard_invalid"] = true;
  if (!previous_final.empty() && !(j.contains("train") && j["train"].contains("init_checkpoint"))) {
    j["train"]["init_checkpoint"] = previous_final;
  }
  return j.dump();
}

// The checkpoint.dir of config `path` (read without a session; "" when unset).
std::string phase_dir(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(bert_tools::read_file_or_exit(path), nullptr, false);
  if (j.is_object() && j.contains("checkpoint") && j["checkpoint"].contains("dir") && j["checkpoint"]["dir"].is_string()) {
    return j["checkpoint"]["dir"].get<std::string>();
  }
  return "";
}

// Where phase `path` writes its final checkpoint.
std::string phase_output(const Options& o, const std::string& path, bool last) {
  if (last && !o.output.empty()) return o.output;
  const std::string dir = phase_dir(path);
  return dir.empty() ? "bert_final.h5" : dir + "/final.h5";
}

// A fresh run (no --resume) refuses a checkpoint.dir that holds another run's files, before any
// rank starts: every rank sees the same directory and refuses alike.
bool check_fresh_dirs(const Options& o) {
  if (o.resume || o.overwrite) return true;
  for (const std::string& config : o.configs) {
    const std::string dir = phase_dir(config);
    const std::vector<std::string> files = dir.empty() ? std::vector<std::string>{} : bert_tools::run_files(dir);
    if (!files.empty()) {
      std::fprintf(stderr,
                   "error: %s: checkpoint.dir '%s' holds another run's checkpoints (%s): continue that run with --resume, "
                   "or start a new one with --overwrite (moves them to %s/overwritten-<time>/)\n",
                   config.c_str(), dir.c_str(), bert_tools::join_names(files).c_str(), dir.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Options o;
  if (!parse_args(argc, argv, o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::vector<std::string> outputs;
  if (o.plan) {
    std::vector<bert_tools::PlannedPhase> phases;
    std::string previous_final;
    for (size_t i = 0; i < o.configs.size(); ++i) {
      phases.push_back({o.configs[i], phase_config(o, o.configs[i], previous_final)});
      previous_final = phase_output(o, o.configs[i], i + 1 == o.configs.size());
    }
    return bert_tools::run_plan(phases, std::max(o.world, 1));
  }
  for (size_t i = 0; i < o.configs.size(); ++i) {
    outputs.push_back(phase_output(o, o.configs[i], i + 1 == o.configs.size()));
    for (size_t j = 0; j < i; ++j) {
      if (outputs[j] == outputs[i]) {
        std::fprintf(stderr, "error: phases %zu (%s) and %zu (%s) would both write their final checkpoint to %s: give them different checkpoint.dir\n",
                     j + 1, o.configs[j].c_str(), i + 1, o.configs[i].c_str(), outputs[i].c_str());
        return 2;
      }
    }
  }
  if (!check_fresh_dirs(o)) return 2;
  FILE* loss_log = nullptr;  // rank 0's, opened when its first phase starts
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  long long steps_left = o.steps_this_run;
  int code = 0;
  bool leader = true;     // known once a session exists; until then every rank is its own leader
  std::string notes;      // what the next phase's rank 0 prints first (skipped phases, the phase header)
  std::string previous_final;
  for (size_t i = 0; i < o.configs.size() && code == 0; ++i) {
    const bool several = o.configs.size() > 1;
    char line[1024];
    if (steps_left == 0) {
      if (leader) std::printf("stopped after %lld steps of this run before phase %zu (rerun with --resume)\n", o.steps_this_run, i + 1);
      break;
    }
    if (o.resume && std::filesystem::exists(outputs[i])) {  // finished: not trained again
      std::snprintf(line, sizeof line, "phase %zu of %zu (%s): already complete, its final checkpoint is %s\n", i + 1,
                    o.configs.size(), o.configs[i].c_str(), outputs[i].c_str());
      notes += line;
      previous_final = outputs[i];
      continue;
    }
    if (several) {
      std::snprintf(line, sizeof line, "== phase %zu of %zu: %s\n", i + 1, o.configs.size(), o.configs[i].c_str());
      notes += line;
    }
    PhaseRun phase(o, o.configs[i], phase_config(o, o.configs[i], previous_final), outputs[i], loss_log, steps_left,
                   notes);
    notes.clear();
    const Outcome outcome = phase.run();
    leader = phase.leader();
    if (outcome == Outcome::failed || outcome == Outcome::signalled || outcome == Outcome::target_missed) {
      code = phase.exit_code();
    }
    if (outcome == Outcome::step_budget_spent) break;
    previous_final = outputs[i];
  }
  // Every phase was already complete: no session told this process its rank, its launcher does.
  if (!notes.empty() && bert_tools::launcher_rank() == 0) std::fputs(notes.c_str(), stdout);
  if (loss_log) std::fclose(loss_log);
  return bert_tools::finish(code);
}
