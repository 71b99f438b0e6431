// MLPerf Training logging: ":::MLLOG {json}" lines in the format of the mlperf-logging package
// (namespace, time_ms, event_type, key, value, metadata with file and lineno), which its
// compliance checker parses. Keys ending in _start / _stop are intervals, all others points in
// time. A logger with an empty path writes nothing, so callers need no checks. A split run
// (bert-train --steps-this-run, then --resume) continues one log with one header, which the
// compliance checker accepts; a new run starts a new file.
#pragma once

#include <cstdio>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace bert_tools {

class MlperfLog {
 public:
  MlperfLog() = default;
  // Opens `path` (empty: disabled); false (with the reason in *error) when that fails. A log is one
  // run: with `continue_run` (bert-train --resume) a run the file holds that has started and not
  // stopped is continued (its header is not written again); otherwise a non-empty file is first
  // moved aside to <path>.<UTC time>, and *moved_to names where.
  bool open(const std::string& path, bool continue_run, std::string* moved_to, std::string* error);
  ~MlperfLog();
  MlperfLog(const MlperfLog&) = delete;
  MlperfLog& operator=(const MlperfLog&) = delete;

  bool enabled() const { return file_ != nullptr; }
  // The file held a started run that this log continues.
  bool continued() const { return continued_; }
  // `key` was logged in this run (by an earlier part of it, or by this process).
  bool logged(const std::string& key) const { return logged_.count(key) > 0; }
  void event(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object(), int line = __builtin_LINE());

 private:
  FILE* file_ = nullptr;
  bool continued_ = false;
  std::set<std::string> logged_;
};

}  // namespace bert_tools
