// MetricsLog: DLLogger JSON-stream records, flushed line by line so a plot can follow a run.
#include "metrics_log.h"

#include <algorithm>
#include <ctime>

namespace bert_tools {

bool MetricsLog::open(const std::string& path) {
  if (path.empty()) return true;
  file_ = std::fopen(path.c_str(), "a");
  opened_ = std::chrono::steady_clock::now();
  return file_ != nullptr;
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::metadata(const std::string& metric, const nlohmann::json& metadata) {
  write({{"type", "METADATA"}, {"metric", metric}, {"metadata", metadata}});
}

void MetricsLog::log(const nlohmann::json& step, const nlohmann::json& data) {
  write({{"type", "LOG"}, {"step", step}, {"data", data}});
}

void MetricsLog::write(nlohmann::json record) {
  if (!file_) return;
  const auto now = std::chrono::system_clock::now();
  const double epoch_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32], datetime[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  const long micros = std::clamp(static_cast<long>((epoch_s - static_cast<double>(t)) * 1e6), 0L, 999999L);
  std::snprintf(datetime, sizeof datetime, "%s.%06ld", stamp, micros);
  char number[32];
  std::snprintf(number, sizeof number, "%.6f", epoch_s);
  record["timestamp"] = number;
  record["datetime"] = datetime;
  std::snprintf(number, sizeof number, "%.6f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count());
  record["elapsedtime"] = number;
  std::fprintf(file_, "DLLL %s\n", record.dump().c_str());
  std::fflush(file_);
}

}  // namespace bert_tools
