// Listing a dataset's shard files and assigning them to ranks per epoch (rules in shard_plan.h).
#include "data/shard_plan.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "data/py_random.h"

namespace bert {

std::vector<std::string> list_shards(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (path.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int rc = glob(path.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        if (fs::is_regular_file(g.gl_pathv[i], ec)) files.emplace_back(g.gl_pathv[i]);
      }
    }
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) fail(Code::io, "cannot expand the shard pattern '", path, "'");
  } else if (fs::is_directory(path, ec)) {
    const fs::path root(path);
    if (fs::is_regular_file(root / "bert_prep_shards.json", ec) && fs::is_directory(root / "train", ec)) {
      fail(Code::data, "data path '", path, "' is the output folder of bert-prep shards: its training shards are in '",
           (root / "train").string(), "'", fs::is_directory(root / "eval", ec) ? " and its evaluation shards in '" +
           (root / "eval").string() + "'" : std::string());
    }
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.empty() && name[0] != '.' && entry.is_regular_file(ec)) files.push_back(entry.path().string());
    }
    if (ec) fail(Code::io, "cannot list the data directory '", path, "': ", ec.message());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    fail(Code::io, "data path '", path, "' does not exist");
  }
  if (files.empty()) fail(Code::data, "data path '", path, "' contains no shard files");
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint32_t> epoch_file_order(uint32_t n_files, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<uint32_t> order(n_files);
  std::iota(order.begin(), order.end(), 0u);
  if (shuffle) {
    const uint64_t lo = seed + epoch;
    PyRandom rng(lo, lo < seed ? 1 : 0);  // the seed + epoch of Python's unbounded integers
    rng.shuffle(order);
  }
  return order;
}

uint64_t slots_per_epoch(uint32_t n_files, int world) {
  const uint64_t w = static_cast<uint64_t>(world);
  return n_files >= w ? (n_files + w - 1) / w : 1;
}

std::vector<ShardSlot> epoch_slots(uint32_t n_files, uint64_t seed, uint64_t epoch, int rank, int world, bool shuffle) {
  BERT_CHECK(n_files > 0 && world > 0 && rank >= 0 && rank < world, Code::internal, "bad shard plan: ", n_files,
             " files, rank ", rank, " of ", world);
  const std::vector<uint32_t> order = epoch_file_order(n_files, seed, epoch, shuffle);
  const uint64_t n = n_files, w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  std::vector<ShardSlot> slots;
  if (w > n) {
    ShardSlot s;
    s.file = order[r % n];
    s.stride = static_cast<uint32_t>((w - 1 - r % n) / n + 1);  // ranks q < w with q % n == r % n
    s.offset = static_cast<uint32_t>(r / n);
    slots.push_back(s);
    return slots;
  }
  const uint64_t count = slots_per_epoch(n_files, world);
  for (uint64_t f_id = 0; f_id < count; ++f_id) {
    ShardSlot s;
    s.file = order[(f_id * w + r) % n];
    slots.push_back(s);
  }
  return slots;
}

}  // namespace bert
