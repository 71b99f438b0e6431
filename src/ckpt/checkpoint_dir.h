// A directory of checkpoints named ckpt_<step>.h5: listing by step, which run wrote each one
// (the run id in its state), and retention (keep the newest N plus every K-th step), applied
// only after a new checkpoint is complete.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bert {

std::string checkpoint_path(const std::string& dir, int64_t step);
// (step, path) of every ckpt_<step>.h5 in dir, oldest first; temporary files are ignored.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// Run id recorded for checkpoints written before run ids existed: they count as one run.
inline constexpr const char* kLegacyRunId = "legacy";

// A ckpt_<step>.h5 of a directory as its summary describes it (the seal's header checked, not the file).
struct RunCheckpoint {
  int64_t step = 0;
  std::string path;
  bool readable = false;     // false: its summary could not be read (corrupt, partial)
  std::string run_id;        // kLegacyRunId when the state names none
  int64_t written_ns = -1;   // wall clock of the write, ns since the epoch; -1 when not recorded
};
// Every ckpt_<step>.h5 in dir, oldest step first.
std::vector<RunCheckpoint> list_run_checkpoints(const std::string& dir);
// The run that wrote the directory's most recent readable checkpoint ("" when there is none):
// the run that owns the directory, the only one a resume continues.
std::string owning_run(const std::vector<RunCheckpoint>& checkpoints);

// Deletes run `run_id`'s checkpoints beyond its newest `keep`, except steps that are multiples
// of keep_every (when > 0); other runs' files are left alone. Returns the deleted paths.
std::vector<std::string> apply_retention(const std::string& dir, const std::string& run_id, int keep,
                                         int64_t keep_every);

// Renames a checkpoint that failed verification to <path>.invalid (<path>.invalid.2, ... if that
// exists), out of the listing, so that nothing writes over it. Returns the new path; Error(io).
std::string set_aside(const std::string& path);

// Deletes temporary files (<name>.h5.tmp.<pid>) that an interrupted write left behind.
std::vector<std::string> remove_partial_checkpoints(const std::string& dir);

}  // namespace bert
