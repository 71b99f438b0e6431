// MlperfLog: one ":::MLLOG" line per event, flushed at once (the log must survive a crash); one
// run per file, continued across the parts of a split run.
#include "mlperf_log.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "run_dir.h"

namespace bert_tools {

namespace {

// The keys of the last run in the log at `path` that started (run_start) and did not stop.
std::set<std::string> unfinished_run_keys(const std::string& path) {
  std::set<std::string> keys;
  std::ifstream in(path);
  std::string line;
  bool started = false;
  while (std::getline(in, line)) {
    const size_t at = line.find(":::MLLOG ");
    if (at == std::string::npos) continue;
    const nlohmann::json record = nlohmann::json::parse(line.substr(at + 9), nullptr, false);
    if (!record.is_object() || !record.contains("key") || !record["key"].is_string()) continue;
    const std::string key = record["key"];
    if (key == "init_start") keys.clear();
    keys.insert(key);
    if (key == "run_start") started = true;
    if (key == "run_stop") started = false;
  }
  return started ? keys : std::set<std::string>{};
}

}  // namespace

bool MlperfLog::open(const std::string& path, bool continue_run, std::string* moved_to, std::string* error) {
  if (path.empty()) return true;
  std::error_code ec;
  if (continue_run) {
    logged_ = unfinished_run_keys(path);
    continued_ = !logged_.empty();
  }
  if (!continued_ && std::filesystem::file_size(path, ec) > 0 && !ec) {
    const std::string stamp = utc_stamp();
    std::string aside = path + "." + stamp;
    for (int n = 2; std::filesystem::exists(aside, ec); ++n) aside = path + "." + stamp + "-" + std::to_string(n);
    std::filesystem::rename(path, aside, ec);
    if (ec) {
      *error = "cannot move the previous run's log '" + path + "' to '" + aside + "': " + ec.message();
      return false;
    }
    *moved_to = aside;
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) *error = "cannot open '" + path + "' for writing";
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
  logged_.insert(key);
  std::fflush(file_);
}

}  // namespace bert_tools
