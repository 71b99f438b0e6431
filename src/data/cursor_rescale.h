// Moving a data position saved by W ranks (one cursor each, as checkpoints hold them) to a run of
// another number of ranks, so that a checkpoint resumes at any world size.
//
// Shard cursors: rank r of W reads position f·W + r of the epoch's file order in its slot f
// (shard_plan.h). The files before the first position some rank had not finished were read by
// the saved run; the new ranks continue the same epoch from that position, each at its own first
// slot at or after it, from the start of the file. Files at or after that position that the saved
// run had started (read partly, or read by ranks ahead of the slowest) are read again; none is
// skipped. Needs at least as many shard files as ranks in both runs.
// Length-bin cursors: every bin's shard cursors moved the same way; the world-wide bin draw
// continues. Synthetic cursors: every rank continues at the sample count rank 0 had reached
// (ranks take equal batches).
#pragma once

#include <nlohmann/json.hpp>

namespace bert {

// The cursor for rank `rank` of `world` from `saved` (a JSON array of the saved ranks' cursors,
// each an object or null). Throws Error(data) naming what does not fit.
nlohmann::json cursor_for_world(const nlohmann::json& saved, int rank, int world);

}  // namespace bert
