// bert-train's run directories: a checkpoint.dir belongs to one run. A fresh run refuses a
// directory holding another run's files unless --overwrite, which moves them aside.
#pragma once

#include <string>
#include <vector>

namespace bert_tools {

// Names of the files in `dir` that belong to a run: ckpt_<step>.h5, final.h5 and temporary
// files of interrupted writes (<name>.h5.tmp.<pid>), sorted. Empty when dir does not exist.
std::vector<std::string> run_files(const std::string& dir);

// The time now in UTC as 20261127T101500Z, for the names of files and folders set aside.
std::string utc_stamp();

// Moves `files` (names in dir) into a new subdirectory dir/overwritten-<UTC time>/ and returns
// its path; on failure returns "" with the reason in *error.
std::string move_aside(const std::string& dir, const std::vector<std::string>& files, std::string* error);

// "ckpt_10.h5, ckpt_11.h5, final.h5" (at most `limit` names, then "and N more").
std::string join_names(const std::vector<std::string>& names, size_t limit = 6);

}  // namespace bert_tools
