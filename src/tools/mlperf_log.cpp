// MlperfLog: one ":::MLLOG" line per event, flushed at once (the log must survive a crash).
#include "mlperf_log.h"

#include <chrono>

namespace bert_tools {

bool MlperfLog::open(const std::string& path) {
  if (path.empty()) return true;
  file_ = std::fopen(path.c_str(), "a");
  return file_ != nullptr;
}

MlperfLog::~MlperfLog() {
  if (file_) std::fclose(file_);
}

void MlperfLog::event(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata, int line) {
  if (!file_) return;
  auto ends_with = [&](const char* suffix) {
    const std::string s = suffix;
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  nlohmann::json m = metadata;
  m["file"] = "bert_train.cpp";
  m["lineno"] = line;
  const nlohmann::json record = {
      {"namespace", ""},
      {"time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now).count()},
      {"event_type", ends_with("_start") ? "INTERVAL_START" : ends_with("_stop") ? "INTERVAL_END" : "POINT_IN_TIME"},
      {"key", key},
      {"value", value},
      {"metadata", m}};
  std::fprintf(file_, ":::MLLOG %s\n", record.dump().c_str());
  std::fflush(file_);
}

}  // namespace bert_tools
