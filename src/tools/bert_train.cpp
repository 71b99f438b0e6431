// bert-train: pretrains BERT from a JSON config through the C ABI, with a progress line
// (step/total, loss, lr, sequences/s, ETA), periodic and final checkpoints, and a non-zero exit
// with the engine's message on any error. SIGTERM/SIGINT make it checkpoint at the next step
// boundary and exit (schedulers send SIGTERM before killing a job); --resume continues from
// the newest valid checkpoint in checkpoint.dir.
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "tool_common.h"

namespace {

volatile sig_atomic_t stop_signal = 0;

void on_stop_signal(int sig) { stop_signal = sig; }

void usage() {
  std::fprintf(stderr,
               "usage: bert-train CONFIG.json [--steps N] [--output FILE.h5] [--resume] [--loss-log FILE] [--quiet]\n"
               "  Trains for train.steps (or N) optimizer steps. With checkpoint.dir set, writes\n"
               "  <dir>/ckpt_<step>.h5 every checkpoint.every steps and on SIGTERM/SIGINT; --resume\n"
               "  continues from the newest valid one. The final checkpoint goes to FILE.h5\n"
               "  (default: <checkpoint.dir>/final.h5, or bert_final.h5 when no dir is configured).\n"
               "  --loss-log appends 'step loss' per step with every digit of the float.\n");
}

void log_to_stderr(bert_log_level level, const char* message, void*) {
  if (level >= BERT_LOG_INFO) std::fprintf(stderr, "[bertengine] %s\n", message);
}

}  // namespace

int main(int argc, char** argv) {
  using bert_tools::failed;
  std::string config_path, output, loss_log_path;
  long long steps_override = -1;
  bool quiet = false, resume = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps_override = std::atoll(argv[++i]);
    } else if (a == "--output" && i + 1 < argc) {
      output = argv[++i];
    } else if (a == "--loss-log" && i + 1 < argc) {
      loss_log_path = argv[++i];
    } else if (a == "--resume") {
      resume = true;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (config_path.empty() && a[0] != '-') {
      config_path = a;
    } else {
      std::fprintf(stderr, "error: unknown argument '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (config_path.empty()) {
    usage();
    return 2;
  }

  std::string text = bert_tools::read_file_or_exit(config_path);
  if (steps_override > 0) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object()) {
      j["train"]["steps"] = steps_override;
      text = j.dump();
    }
  }
  if (!quiet) bert_set_log_callback(log_to_stderr, nullptr);
  bert_session* session = nullptr;
  if (failed(bert_session_create(text.c_str(), nullptr, &session), config_path.c_str())) return 1;

  int rank = 0;
  bert_session_rank(session, &rank, nullptr, nullptr);
  const bool leader = rank == 0;  // under mpirun/srun only rank 0 prints progress
  const nlohmann::json resolved = nlohmann::json::parse(bert_session_config(session));
  const long long total = resolved["train"]["steps"].get<long long>();
  const long long every = resolved["checkpoint"]["every"].get<long long>();
  const std::string dir = resolved["checkpoint"]["dir"].get<std::string>();
  const int log_every = resolved["train"]["log_every"].get<int>();
  if (output.empty()) output = dir.empty() ? "bert_final.h5" : dir + "/final.h5";
  const bool tty = isatty(fileno(stdout));
  long long first_step = 1;
  if (resume) {
    if (dir.empty()) {
      std::fprintf(stderr, "error: --resume needs checkpoint.dir in the config\n");
      bert_session_destroy(session);
      return 2;
    }
    int64_t resumed = -1;
    if (failed(bert_checkpoint_resume(session, nullptr, &resumed), "resume")) {
      bert_session_destroy(session);
      return 1;
    }
    if (resumed >= 0) {
      if (leader) std::printf("resumed from step %lld\n", static_cast<long long>(resumed));
      first_step = resumed + 1;
    } else if (leader) {
      std::printf("no valid checkpoint in %s: starting from step 0\n", dir.c_str());
    }
  }
  FILE* loss_log = nullptr;
  if (!loss_log_path.empty() && !(loss_log = std::fopen(loss_log_path.c_str(), "a"))) {
    std::fprintf(stderr, "error: cannot open '%s' for writing\n", loss_log_path.c_str());
    bert_session_destroy(session);
    return 2;
  }
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  bert_step_result r;
  bert_step_result_init(&r);
  const auto t0 = std::chrono::steady_clock::now();
  double loss_sum = 0, mlm_sum = 0, nsp_sum = 0;  // averaged over the log window
  int loss_count = 0;
  for (long long step = first_step; step <= total; ++step) {
    if (failed(bert_step(session, nullptr, &r), "bert_step")) {
      bert_session_destroy(session);
      return 1;
    }
    if (loss_log) {
      std::fprintf(loss_log, "%lld %.9g\n", step, r.loss);
      std::fflush(loss_log);
    }
    loss_sum += r.loss;
    mlm_sum += r.mlm_loss;
    nsp_sum += r.nsp_loss;
    ++loss_count;
    if (r.skipped && leader) {
      std::printf("%sstep %lld skipped: gradients overflowed at loss scale %g\n", tty ? "\n" : "", step,
                  static_cast<double>(r.loss_scale));
    }
    if (!quiet && leader && (step % log_every == 0 || step == total || tty)) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double eta = elapsed / (step - first_step + 1) * (total - step);
      std::printf("%sstep %lld/%lld  loss %.4f (mlm %.4f nsp %.4f)  lr %.3e  %.1f seq/s  ETA %s%s",
                  tty ? "\r" : "", step, total, loss_sum / loss_count, mlm_sum / loss_count, nsp_sum / loss_count, r.learning_rate,
                  r.sequences_per_second, bert_tools::format_duration(eta).c_str(),
                  tty && step % log_every != 0 && step != total ? "   " : "\n");
      std::fflush(stdout);
      if (step % log_every == 0) {
        loss_sum = mlm_sum = nsp_sum = 0;
        loss_count = 0;
      }
    }
    const bool stopping = stop_signal != 0;
    if (!dir.empty() && ((every > 0 && step % every == 0 && step != total) || stopping)) {
      if (failed(bert_checkpoint(session, nullptr), "checkpoint")) {
        if (!stopping) continue;  // a failed save keeps earlier checkpoints; training goes on
        bert_session_destroy(session);
        return 1;
      }
    }
    if (stopping) {
      if (leader) std::printf("\nstopped by signal %d at step %lld%s\n", static_cast<int>(stop_signal), step,
                  dir.empty() ? " (no checkpoint.dir: state not saved)" : "; checkpoint written");
      bert_session_destroy(session);
      return 128 + stop_signal;
    }
  }
  if (resolved["data"]["source"] == "synthetic" || !resolved["data"]["eval_dir"].get<std::string>().empty()) {
    bert_eval_result e;
    bert_eval_result_init(&e);
    if (failed(bert_eval(session, nullptr, &e), "bert_eval")) {
      bert_session_destroy(session);
      return 1;
    }
    if (leader) std::printf("eval: %lld sequences, %lld masked tokens: mlm accuracy %.4f, mlm loss %.4f, nsp accuracy %.4f\n",
                static_cast<long long>(e.sequences), static_cast<long long>(e.masked_tokens), e.mlm_accuracy,
                e.mlm_loss, e.nsp_accuracy);
  }
  if (failed(bert_checkpoint(session, output.c_str()), output.c_str())) {
    bert_session_destroy(session);
    return 1;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (leader) std::printf("done: %lld steps in %s, checkpoint written to %s\n", total, bert_tools::format_duration(elapsed).c_str(),
              output.c_str());
  if (loss_log) std::fclose(loss_log);
  bert_session_destroy(session);
  return 0;
}
