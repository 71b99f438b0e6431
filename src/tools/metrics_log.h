// A metrics log in NVIDIA DLLogger's JSON-stream shape, so DLE tooling reads it: one line
// "DLLL {json}" per record with timestamp (seconds, as text), datetime, elapsedtime (seconds
// since the log was opened, as text), type ("LOG" or "METADATA"), and for LOG records a step
// (a list, e.g. [phase, step]; [] for a run summary) and a data object of metric values.
// A logger with an empty path writes nothing.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace bert_tools {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Appends to `path` (empty: disabled); false when the file cannot be opened.
  bool open(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // DLLogger's metadata record: a metric's unit and the like.
  void metadata(const std::string& metric, const nlohmann::json& metadata);
  void log(const nlohmann::json& step, const nlohmann::json& data);

 private:
  void write(nlohmann::json record);

  FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point opened_;
};

}  // namespace bert_tools
