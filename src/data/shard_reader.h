// Reading one pretraining shard (HDF5) into memory: the DLE fixed-width format, the MLPerf
// variable-length format and its packed variant (unpacked here into one entry per sequence).
// Every value is checked against the limits (vocabulary, max_seq_length, max_predictions) and
// each failure is an Error(data) naming the file, the dataset key and the sample; a file that
// cannot be opened or read is an Error(io) naming the file and dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"

namespace bert {

enum class ShardFormat { dle, mlperf, mlperf_packed };

const char* format_name(ShardFormat format);

struct ShardLimits {
  int max_seq_length = 512;
  int max_predictions_per_seq = 80;
  int vocab_size = 30522;
};

// What inspect_shard learns from a file without reading its samples.
struct ShardHeader {
  std::string file;
  ShardFormat format = ShardFormat::dle;
  int64_t rows = 0;        // HDF5 rows; a packed row holds several sequences
  int64_t seq_width = 0;   // DLE: L of input_ids [N, L]; 0 for variable-length formats
  int64_t pred_width = 0;  // DLE: P of masked_lm_positions [N, P]; 0 otherwise
};

// Decoded sequences of one shard, stored compactly: the real tokens of all sequences
// concatenated, with per-sequence offsets (no padding is kept in memory).
struct ShardSamples {
  std::string file;
  std::vector<int64_t> token_begin{0};       // [n + 1]
  std::vector<int32_t> input_ids;            // [tokens]
  std::vector<int8_t> segment_ids;           // [tokens]
  std::vector<int64_t> pred_begin{0};        // [n + 1]
  std::vector<int32_t> masked_lm_positions;  // [predictions]
  std::vector<int32_t> masked_lm_ids;        // [predictions]
  std::vector<int8_t> next_sentence_labels;  // [n]

  size_t size() const { return next_sentence_labels.size(); }
  int length(size_t i) const { return static_cast<int>(token_begin[i + 1] - token_begin[i]); }
  int predictions(size_t i) const { return static_cast<int>(pred_begin[i + 1] - pred_begin[i]); }
  size_t bytes() const;
  // Writes sequence i into row b of `out` (already resized): real tokens with input_mask 1,
  // zeros beyond them and beyond the real predictions (the DLE padding convention).
  void copy_to(size_t i, HostBatch& out, int b) const;
};

// Opens `path`, detects (format "auto": a file with `input_mask` is DLE, one with
// `packed_input_len` is MLPerf packed, any other MLPerf variable-length) or checks the format
// ("dle", "mlperf", "mlperf_packed"), and validates keys, dtype classes and shapes against
// `limits` (a DLE file wider than max_seq_length or max_predictions_per_seq is rejected here).
ShardHeader inspect_shard(const std::string& path, const ShardLimits& limits, const std::string& format = "auto");

// An open shard, decoded a band of rows at a time so a background thread can interleave
// decoding with other work.
class ShardReader {
 public:
  ShardReader(const std::string& path, const ShardLimits& limits, const std::string& format = "auto");
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardHeader& header() const;
  // Rows per read_rows call that keep HDF5 chunk decompression to once per chunk.
  int64_t band_rows() const;
  // Decodes rows [begin, begin + count) and appends their sequences to `out`.
  void read_rows(int64_t begin, int64_t count, ShardSamples& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a whole shard.
ShardSamples read_shard(const std::string& path, const ShardLimits& limits, const std::string& format = "auto");

}  // namespace bert
