// Checkpoint directory listing and retention.
#include "ckpt/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>
#include <regex>

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

std::vector<std::string> apply_retention(const std::string& dir, int keep, int64_t keep_every) {
  std::vector<std::pair<int64_t, std::string>> all = list_checkpoints(dir);
  std::vector<std::string> deleted;
  const int64_t n = static_cast<int64_t>(all.size());
  for (int64_t i = 0; i + keep < n; ++i) {
    const auto& [step, path] = all[i];
    if (keep_every > 0 && step % keep_every == 0) continue;
    std::error_code ec;
    if (fs::remove(path, ec)) deleted.push_back(path);
  }
  return deleted;
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
