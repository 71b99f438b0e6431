// The evaluation set, held in memory and cut into fixed micro-batches: batch k holds samples
// [k * batch_size, (k + 1) * batch_size) of the set, whatever the number of ranks, so a
// distributed evaluation (rank r takes the batches with k % world == r) sees exactly the
// batches a single process sees. From shards: the first max_samples sequences (0: all) of the
// eval shards in file-name order. Synthetic: a fixed number of seeded batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/shard_reader.h"

namespace bert {

class EvalSet {
 public:
  // Reads every shard of `path` (directory, glob or file) up to max_samples sequences.
  // Error(io/data) naming the file for a bad shard; Error(data) for an empty set.
  static std::unique_ptr<EvalSet> from_shards(const std::string& path, const ShardLimits& limits,
                                              const std::string& format, int64_t max_samples, int batch_size);
  // `batches` batches of `batch_size` drawn from `source` (synthetic evaluation data).
  static std::unique_ptr<EvalSet> from_source(DataSource& source, int batches, int batch_size);

  int64_t samples() const { return samples_; }
  int64_t batches() const { return (samples_ + batch_size_ - 1) / batch_size_; }
  // Batch k (< batches()); the last one may be short.
  void batch(int64_t k, HostBatch& out) const;

 private:
  EvalSet(int batch_size, int seq_length, int max_predictions)
      : batch_size_(batch_size), seq_length_(seq_length), max_predictions_(max_predictions) {}

  int batch_size_, seq_length_, max_predictions_;
  int64_t samples_ = 0;
  std::vector<HostBatch> fixed_;       // from_source: the batches themselves
  std::vector<ShardSamples> shards_;   // from_shards: decoded sequences, file by file
  std::vector<int64_t> shard_begin_;   // first set index of each shard
};

}  // namespace bert
