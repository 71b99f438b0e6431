// OpProfiler: an observer (Ops::add_observer) that records, per operation, how often it ran and
// for how long. Each call is bracketed by the backend's synchronize(), so the time is the
// operation's own (GPU kernels included) at the price of losing the overlap between consecutive
// kernels: a profile, not a throughput measurement.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "backend/ops.h"

namespace bert {

struct OpTiming {
  int64_t calls = 0;
  double seconds = 0;
};

class OpProfiler final : public OpObserver {
 public:
  // Per operation name ("linear_fwd", "linear_fwd+activation", "attention_bwd", "upload", ...):
  // calls and seconds since the last reset.
  const std::map<std::string, OpTiming>& timings() const { return timings_; }
  void reset() { timings_.clear(); }

  void before(Ops& ops, const char* op) override;
  void after(Ops& ops, const char* op) override;

 private:
  std::map<std::string, OpTiming> timings_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace bert
