// Rewriting existing pretraining shards (any readable format) into new DLE or MLPerf shards:
//  - split_length_bins: Samsung's MLPerf recipe, each shard's sequences dealt into `bins` length
//    bins (4 at 512: 1-128, 129-256, 257-384, 385-512 tokens), written as <out>/bin_<b>/<name>,
//    the layout data.length_bins trains from;
//  - pick_eval_samples: MLPerf's evaluation set, a fixed number of sequences drawn at random
//    (seeded, without replacement) from held-out shards into one shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard_reader.h"
#include "prep/shard_writer.h"

namespace bert {

struct ShardRewriteOptions {
  ShardLimits limits;            // what the input must satisfy (checked while reading)
  std::string format = "auto";   // of the input
  ShardWriteOptions write;       // of the output (max_seq_length / max_predictions from limits)
  bool overwrite = false;        // replace existing output files
};

struct LengthBinSummary {
  uint64_t files = 0;
  std::vector<uint64_t> per_bin;  // sequences written to each bin
};

// `inputs`: shard files, directories or globs (shard_plan.h's list_shards). Error(io) naming the
// output when it exists and !overwrite.
LengthBinSummary split_length_bins(const std::vector<std::string>& inputs, const std::string& output_dir, int bins,
                                   const ShardRewriteOptions& options);

// Returns the number of sequences written (min(count, available)).
uint64_t pick_eval_samples(const std::vector<std::string>& inputs, const std::string& output_file, uint64_t count,
                           uint64_t seed, const ShardRewriteOptions& options);

}  // namespace bert
