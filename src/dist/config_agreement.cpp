// check_same_config: allgather of each rank's config (per-rank keys removed), then a key-by-key
// comparison with rank 0's so the error names the key, the ranks and both values.
#include "dist/config_agreement.h"

#include <sstream>

#include "core/error.h"
#include "core/log.h"

namespace bert {
namespace {

// Keys that may legitimately differ between ranks (JSON pointers).
const char* const kPerRankKeys[] = {"/train/threads", "/data/train_dir", "/data/eval_dir", "/device"};

nlohmann::json shared_part(const nlohmann::json& config) {
  nlohmann::json flat = config.flatten();
  for (const char* key : kPerRankKeys) flat.erase(key);
  return flat;
}

std::string dotted(const std::string& pointer) {
  std::string out = pointer.substr(1);
  for (char& c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

}  // namespace

void check_same_config(Communicator& comm, const nlohmann::json& resolved_config) {
  if (comm.world_size() == 1) return;
  const std::vector<std::string> all = comm.allgather_text(shared_part(resolved_config).dump());
  const nlohmann::json reference = nlohmann::json::parse(all[0]);
  std::ostringstream diffs;
  int count = 0;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    for (const auto& [key, ours] : reference.items()) {
      const std::string theirs = other.contains(key) ? other.at(key).dump() : "(absent)";
      if (theirs == ours.dump()) continue;
      if (count++ < 8) {
        diffs << (count > 1 ? "; " : "") << dotted(key) << " = " << theirs << " on rank " << r << " but " << ours.dump()
              << " on rank 0";
      }
    }
  }
  if (count > 0) {
    fail(Code::config, "config differs between ranks (", count, " difference", count > 1 ? "s" : "", "): ", diffs.str());
  }
}

uint64_t world_seed(Communicator& comm, uint64_t own_seed) {
  if (comm.world_size() == 1) return own_seed;
  const uint64_t seed = std::stoull(comm.allgather_text(std::to_string(own_seed)).at(0));
  if (seed != own_seed) {
    log_message(log_warning, "train.seed = " + std::to_string(own_seed) + " on rank " + std::to_string(comm.rank()) +
                                 " differs from rank 0's " + std::to_string(seed) +
                                 ": the world uses one seed, rank 0's (weights, dropout, data order)");
  }
  return seed;
}

}  // namespace bert
