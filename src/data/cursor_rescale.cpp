// Data cursors saved by W ranks continued by W' ranks (see cursor_rescale.h).
#include "data/cursor_rescale.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "data/shard_plan.h"

namespace bert {
namespace {

uint64_t field(const nlohmann::json& c, const char* key) { return c.at(key).get<uint64_t>(); }

// The shard cursors of one dataset (one per saved rank, in rank order) moved to rank/world.
nlohmann::json shard_cursor_for_world(const std::vector<nlohmann::json>& saved, int rank, int world) {
  const nlohmann::json& first = saved.front();
  const uint64_t files = field(first, "files"), seed = field(first, "seed");
  const uint64_t old_world = saved.size();
  for (size_t r = 0; r < saved.size(); ++r) {
    const nlohmann::json& c = saved[r];
    BERT_CHECK(c.value("kind", "") == "shards" && field(c, "files") == files && field(c, "seed") == seed &&
                   field(c, "rank") == r && field(c, "world") == old_world,
               Code::data, "saved data cursor ", r, " of ", old_world, " does not belong with the others: ", c.dump());
  }
  BERT_CHECK(files >= old_world && files >= static_cast<uint64_t>(world), Code::data,
             "the data position of ", old_world, " ranks over ", files, " shard files cannot move to ", world,
             " ranks: resuming at another world size needs at least as many shard files as ranks in both runs");
  // Position f·W + r is finished by rank r when its slot is past f (or it is in a later epoch).
  uint64_t epoch = std::numeric_limits<uint64_t>::max();
  for (const nlohmann::json& c : saved) epoch = std::min(epoch, field(c, "epoch"));
  uint64_t first_unfinished = files;
  for (size_t r = 0; r < saved.size(); ++r) {
    if (field(saved[r], "epoch") == epoch) {
      first_unfinished = std::min(first_unfinished, field(saved[r], "slot") * old_world + r);
    }
  }
  if (first_unfinished >= files) {  // only wrapped repeats of this epoch were left
    ++epoch;
    first_unfinished = 0;
  }
  const uint64_t w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  uint64_t slot = first_unfinished <= r ? 0 : (first_unfinished - r + w - 1) / w;
  if (slot >= slots_per_epoch(static_cast<uint32_t>(files), world)) {
    ++epoch;
    slot = 0;
  }
  return {{"kind", "shards"}, {"epoch", epoch}, {"slot", slot}, {"sample", 0}, {"files", files},
          {"rank", rank},     {"world", world}, {"seed", seed}};
}

}  // namespace

nlohmann::json cursor_for_world(const nlohmann::json& saved, int rank, int world) {
  BERT_CHECK(saved.is_array() && !saved.empty(), Code::data, "saved data cursors are not a non-empty list: ",
             saved.dump());
  BERT_CHECK(world >= 1 && rank >= 0 && rank < world, Code::internal, "rank ", rank, " of world ", world);
  try {
    const nlohmann::json& first = saved.front();
    if (first.is_null()) return nullptr;
    const std::string kind = first.value("kind", "");
    std::vector<nlohmann::json> per_rank(saved.begin(), saved.end());
    if (kind == "shards") return shard_cursor_for_world(per_rank, rank, world);
    if (kind == "length_bins") {
      nlohmann::json out = first;
      nlohmann::json bins = nlohmann::json::array();
      for (size_t b = 0; b < first.at("cursors").size(); ++b) {
        std::vector<nlohmann::json> bin;
        for (const nlohmann::json& c : per_rank) bin.push_back(c.at("cursors").at(b));
        bins.push_back(shard_cursor_for_world(bin, rank, world));
      }
      out["cursors"] = bins;
      return out;
    }
    if (first.contains("sample") && first.size() == 1) return first;  // synthetic
    fail(Code::data, "saved data cursor of an unknown kind: ", first.dump());
  } catch (const nlohmann::json::exception& e) {
    fail(Code::data, "bad saved data cursors ", saved.dump(), ": ", e.what());
  }
}

}  // namespace bert
