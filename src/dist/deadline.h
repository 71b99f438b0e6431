// Deadline: the clock a collective polls against (dist.timeout_s), and the pause between polls
// — yield at first so small messages finish fast, then short sleeps so a rank waiting for a
// slow peer leaves the core to it (ranks often share cores in tests).
#pragma once

#include <chrono>
#include <thread>

namespace bert {

class Deadline {
 public:
  explicit Deadline(double timeout_s) : start_(Clock::now()), timeout_(timeout_s) {}
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool expired() const { return elapsed() > timeout_; }
  double timeout() const { return timeout_; }
  void pause() {
    if (elapsed() < kSpinSeconds) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  static constexpr double kSpinSeconds = 0.005;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  double timeout_;
};

}  // namespace bert
