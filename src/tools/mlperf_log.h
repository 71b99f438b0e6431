// MLPerf Training logging: ":::MLLOG {json}" lines in the format of the mlperf-logging package
// (namespace, time_ms, event_type, key, value, metadata with file and lineno), which its
// compliance checker parses. Keys ending in _start / _stop are intervals, all others points in
// time. A logger with an empty path writes nothing, so callers need no checks.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace bert_tools {

class MlperfLog {
 public:
  MlperfLog() = default;
  // Appends to `path` (empty: disabled); false when the file cannot be opened.
  bool open(const std::string& path);
  ~MlperfLog();
  MlperfLog(const MlperfLog&) = delete;
  MlperfLog& operator=(const MlperfLog&) = delete;

  bool enabled() const { return file_ != nullptr; }
  void event(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object(), int line = __builtin_LINE());

 private:
  FILE* file_ = nullptr;
};

}  // namespace bert_tools
