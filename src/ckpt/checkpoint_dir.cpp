// Checkpoint directory listing, run ownership and retention.
#include "ckpt/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "ckpt/checkpoint.h"
#include "core/error.h"

namespace bert {

namespace fs = std::filesystem;

std::string checkpoint_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / ("ckpt_" + std::to_string(step) + ".h5")).string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  static const std::regex name("ckpt_([0-9]+)\\.h5");
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file(ec) && std::regex_match(file, m, name)) {
      out.emplace_back(std::stoll(m[1].str()), entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RunCheckpoint> list_run_checkpoints(const std::string& dir) {
  std::vector<RunCheckpoint> out;
  for (const auto& [step, path] : list_checkpoints(dir)) {
    RunCheckpoint c;
    c.step = step;
    c.path = path;
    try {
      const nlohmann::json state = read_checkpoint_summary(path);
      c.run_id = state.value("run_id", std::string(kLegacyRunId));
      c.written_ns = state.value("written_ns", int64_t{-1});
      c.readable = true;
    } catch (const Error&) {
    } catch (const nlohmann::json::exception&) {  // a state whose run_id/written_ns has another type
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string owning_run(const std::vector<RunCheckpoint>& checkpoints) {
  const RunCheckpoint* newest = nullptr;
  for (const RunCheckpoint& c : checkpoints) {
    if (c.readable && (!newest || c.written_ns > newest->written_ns ||
                       (c.written_ns == newest->written_ns && c.step > newest->step))) {
      newest = &c;
    }
  }
  return newest ? newest->run_id : "";
}

std::vector<std::string> apply_retention(const std::string& dir, const std::string& run_id, int keep,
                                         int64_t keep_every) {
  std::vector<RunCheckpoint> mine;
  for (RunCheckpoint& c : list_run_checkpoints(dir)) {
    if (c.readable && c.run_id == run_id) mine.push_back(std::move(c));
  }
  std::vector<std::string> deleted;
  const int64_t n = static_cast<int64_t>(mine.size());
  for (int64_t i = 0; i + keep < n; ++i) {
    if (keep_every > 0 && mine[i].step % keep_every == 0) continue;
    std::error_code ec;
    if (fs::remove(mine[i].path, ec)) deleted.push_back(mine[i].path);
  }
  return deleted;
}

std::string set_aside(const std::string& path) {
  std::string target = path + ".invalid";
  std::error_code ec;
  for (int n = 2; fs::exists(target, ec); ++n) target = path + ".invalid." + std::to_string(n);
  fs::rename(path, target, ec);
  if (ec) fail(Code::io, "cannot rename '", path, "' to '", target, "': ", ec.message());
  return target;
}

std::vector<std::string> remove_partial_checkpoints(const std::string& dir) {
  static const std::regex name(".+\\.h5\\.tmp\\.[0-9]+");
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(entry.path().filename().string(), name) && fs::remove(entry.path(), ec)) {
      removed.push_back(entry.path().string());
    }
  }
  return removed;
}

}  // namespace bert
