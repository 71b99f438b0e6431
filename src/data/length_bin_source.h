// Samsung's length-binned training data (their SplitRandomSampler), for data.length_bins: the
// training directory holds bin_0, bin_1, ... (made by `bert-prep bins`), each read by its own
// shard source with the usual shard plan across ranks. Before each micro-batch one bin is drawn,
// with probability proportional to its number of sequences, from a Philox stream keyed by the
// seed and the draw's index alone, so every rank draws the same bin at every step: a step's
// micro-batches across the world have similar lengths and no rank waits for a longer bin.
// The cursor holds the draw count, the batches taken from each bin and each bin's own cursor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/shard_source.h"

namespace bert {

// One bin_<b> directory of a length-binned training directory and its number of sequences.
struct LengthBin {
  std::string name, path;
  uint64_t rows = 0;
};

// The bins under `options.path` (bin_0, bin_1, ... up to the first missing index) that hold
// shards, read with options' limits and format; empty bins (bert-prep writes no file for them)
// are left out. Error(data) when none holds shards.
std::vector<LengthBin> list_length_bins(const ShardSourceOptions& options);

// `options.path` is the directory holding the bin_<b> subdirectories; empty bins (no files)
// are left out. Error(data) when there is no bin_0.
std::unique_ptr<DataSource> make_length_bin_source(const ShardSourceOptions& options);

}  // namespace bert
