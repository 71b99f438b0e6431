// A directory of checkpoints named ckpt_<step>.h5: listing by step, and retention (keep the
// newest N plus every K-th step), applied only after a new checkpoint is complete.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bert {

std::string checkpoint_path(const std::string& dir, int64_t step);
// (step, path) of every ckpt_<step>.h5 in dir, oldest first; temporary files are ignored.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);
// Deletes checkpoints beyond the newest `keep`, except steps that are multiples of keep_every
// (when > 0). Returns the deleted paths.
std::vector<std::string> apply_retention(const std::string& dir, int keep, int64_t keep_every);

// Deletes temporary files (<name>.h5.tmp.<pid>) that an interrupted write left behind.
std::vector<std::string> remove_partial_checkpoints(const std::string& dir);

}  // namespace bert
