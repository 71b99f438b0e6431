// Progress line drawing (4 redraws per second) and byte formatting.
#include "prep/progress.h"

#include <unistd.h>

#include <cstdio>

namespace bert {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

Progress::Progress(std::string label, uint64_t total_bytes)
    : label_(std::move(label)), total_(total_bytes), start_(std::chrono::steady_clock::now()),
      enabled_(isatty(STDERR_FILENO) != 0) {
  if (!enabled_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(250));
      if (!stop_) draw();
    }
  });
}

Progress::~Progress() { finish(); }

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::draw() {
  const double t = elapsed();
  const auto done = static_cast<double>(bytes_.load(std::memory_order_relaxed));
  const double rate = t > 0 ? done / t : 0;
  char line[256];
  int len = std::snprintf(line, sizeof line, "\r%s: %s", label_.c_str(), format_bytes(done).c_str());
  if (total_ > 0) {
    const double frac = done / static_cast<double>(total_);
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), " / %s (%.0f%%)",
                         format_bytes(static_cast<double>(total_)).c_str(), 100.0 * frac);
  }
  const auto documents = documents_.load(std::memory_order_relaxed);
  len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), "  %s/s  %llu docs (%.0f/s)",
                       format_bytes(rate).c_str(), static_cast<unsigned long long>(documents),
                       t > 0 ? static_cast<double>(documents) / t : 0.0);
  if (total_ > 0 && rate > 0 && done < static_cast<double>(total_)) {
    const double eta = (static_cast<double>(total_) - done) / rate;
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), "  ETA %d:%02d",
                         static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  }
  std::fprintf(stderr, "%s\033[K", line);
  std::fflush(stderr);
}

double Progress::finish() {
  if (enabled_ && thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  return elapsed();
}

}  // namespace bert
