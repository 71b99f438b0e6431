// Samsung's length-binned training data (their SplitRandomSampler), for data.length_bins: the
// training directory holds bin_0, bin_1, ... (made by `bert-prep bins`), each read by its own
// shard source with the usual shard plan across ranks. Before each micro-batch one bin is drawn,
// with probability proportional to its number of sequences, from a Philox stream keyed by the
// seed and the draw's index alone, so every rank draws the same bin at every step: a step's
// micro-batches across the world have similar lengths and no rank waits for a longer bin.
// The cursor holds the draw count, the batches taken from each bin and each bin's own cursor.
#pragma once

#include <memory>

#include "data/batch.h"
#include "data/shard_source.h"

namespace bert {

// `options.path` is the directory holding the bin_<b> subdirectories; empty bins (no files)
// are left out. Error(data) when there is no bin_0.
std::unique_ptr<DataSource> make_length_bin_source(const ShardSourceOptions& options);

}  // namespace bert
