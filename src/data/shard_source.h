// The DataSource over a dataset of HDF5 pretraining shards (DLE, MLPerf variable-length or
// packed; see shard_reader.h): shard assignment and shuffles as in DLE (shard_plan.h,
// sample_order.h), a background prefetch thread (shard_prefetcher.h), a JSON cursor that
// resumes exactly, and optional length bucketing. Batches are padded to max_seq_length and
// max_predictions_per_seq with input_mask marking the real tokens.
//
// Construction lists the shards and validates every file's header (keys, dtypes, shapes), so a
// bad dataset fails before the first step; with skip_bad_shards a bad shard is skipped with a
// warning instead (at construction for header faults, when reached for faults in its values).
// The source is used by one thread; the prefetch thread is internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/batch.h"

namespace bert {

struct ShardSourceOptions {
  std::string path;             // directory, glob pattern, or one file
  std::string format = "auto";  // auto, dle, mlperf, mlperf_packed
  int max_seq_length = 512;
  int max_predictions_per_seq = 80;
  int vocab_size = 30522;
  uint64_t seed = 12345;
  int rank = 0, world = 1;
  bool shuffle = true;  // false: files in name order, samples in file order (evaluation)
  bool skip_bad_shards = false;
  int bucket_bins = 0;       // > 0: length-aware batching with this many bins (sample_order.h)
  int batch_size = 0;        // > 0: start prefetching at construction for this batch size
  int prefetch_batches = 8;  // depth of the batch queue
};

// Throws Error(config) for bad options, Error(io) / Error(data) for a bad dataset.
std::unique_ptr<DataSource> make_shard_source(const ShardSourceOptions& options);

}  // namespace bert
