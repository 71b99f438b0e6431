// Terminal progress for bert-prep: a background thread redraws one status line on stderr
// (bytes done of total, rate, documents, ETA) while workers add to atomic counters. Nothing
// is drawn when stderr is not a terminal, so logs and pipes stay clean.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace bert {

class Progress {
 public:
  // `total_bytes` 0 means unknown (no percentage or ETA).
  Progress(std::string label, uint64_t total_bytes);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t bytes, uint64_t documents) {
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    documents_.fetch_add(documents, std::memory_order_relaxed);
  }
  // Stops redrawing and clears the line; returns the seconds since construction.
  double finish();
  double elapsed() const;

 private:
  void draw();
  std::string label_;
  uint64_t total_;
  std::atomic<uint64_t> bytes_{0}, documents_{0};
  std::chrono::steady_clock::time_point start_;
  bool enabled_;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

// "12.3 MB", "512 B": human-readable byte counts for summaries.
std::string format_bytes(double bytes);

}  // namespace bert
