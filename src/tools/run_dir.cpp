// Run-directory checks and --overwrite's move aside (see run_dir.h).
#include "run_dir.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <regex>
#include <system_error>

namespace bert_tools {

namespace fs = std::filesystem;

std::vector<std::string> run_files(const std::string& dir) {
  static const std::regex name("ckpt_[0-9]+\\.h5|final\\.h5|.+\\.h5\\.tmp\\.[0-9]+");
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, name) && !entry.is_directory(ec)) out.push_back(file);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string utc_stamp() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return stamp;
}

std::string move_aside(const std::string& dir, const std::vector<std::string>& files, std::string* error) {
  const std::string stamp = utc_stamp();
  fs::path target = fs::path(dir) / ("overwritten-" + stamp);
  std::error_code ec;
  for (int n = 2; fs::exists(target, ec); ++n) target = fs::path(dir) / ("overwritten-" + stamp + "-" + std::to_string(n));
  if (!fs::create_directory(target, ec)) {
    *error = "cannot create '" + target.string() + "': " + ec.message();
    return "";
  }
  for (const std::string& file : files) {
    fs::rename(fs::path(dir) / file, target / file, ec);
    if (ec) {
      *error = "cannot move '" + (fs::path(dir) / file).string() + "' to '" + target.string() + "': " + ec.message();
      return "";
    }
  }
  return target.string();
}

std::string join_names(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

}  // namespace bert_tools
