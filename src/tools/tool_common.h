// Small helpers shared by the command-line tools: reading files, status checks over the C
// ABI, human-readable durations, and peak memory.
#pragma once

#include <string>

#include "bert.h"

namespace bert_tools {

// Reads a whole file; exits with a message naming the file when it cannot.
std::string read_file_or_exit(const std::string& path);
// Prints "<what>: <status>: <bert_last_error()>" to stderr and returns true on failure.
bool failed(bert_status status, const char* what);
// Whether bert-train evaluates after optimizer step `step` (1-based): every `every` steps, or each
// time another `every_samples` samples were seen at `global_batch` per step (MLPerf); never when
// both are 0. (It also evaluates at the end of a phase.)
bool evaluation_due(long long step, long long every, long long every_samples, long long global_batch);
// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);
// This process's rank as its launcher set it (Open MPI, Slurm, torchrun-style RANK, in the order
// src/dist/launch.cpp reads them), 0 without one: for the tool's lines before any session exists.
int launcher_rank();
// Peak resident set size of this process in bytes.
long peak_rss_bytes();
// A tool's last word once its sessions are destroyed: bert_finalize (gives back MPI when a
// session initialised it), then `code`, or 1 if finalising failed.
int finish(int code);

}  // namespace bert_tools
