// A host-side batch of pretraining samples in the DLE layout (all int32, row-major), and the
// interface every data source implements (synthetic, HDF5 shards, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

struct HostBatch {
  int batch_size = 0;       // B
  int seq_length = 0;       // S
  int max_predictions = 0;  // P
  std::vector<int32_t> input_ids;             // [B, S]
  std::vector<int32_t> segment_ids;           // [B, S]
  std::vector<int32_t> input_mask;            // [B, S]
  std::vector<int32_t> masked_lm_positions;   // [B, P], zero-padded
  std::vector<int32_t> masked_lm_ids;         // [B, P]
  std::vector<int32_t> next_sentence_labels;  // [B]

  void resize(int B, int S, int P);
  // Number of input_mask == 1 tokens.
  int64_t real_tokens() const;
};

// A stream of batches. Sources are deterministic for a given config and seed, and their
// position is a small JSON cursor that a checkpoint saves and a restart restores.
class DataSource {
 public:
  virtual ~DataSource() = default;
  // Fills `out` with the next `batch_size` samples (seq_length and max_predictions come from
  // the source's config). Wraps around epochs; throws Error(data) on a bad shard.
  virtual void next(HostBatch& out, int batch_size) = 0;
  virtual nlohmann::json cursor() const = 0;
  virtual void restore(const nlohmann::json& cursor) = 0;
  virtual std::string describe() const = 0;
};

}  // namespace bert
