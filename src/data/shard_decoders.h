// Internal interface between ShardReader and the per-format decoders: header validation (keys,
// dtype classes, shapes), the row decoders of each format, and the single place where a decoded
// sequence is checked against the limits and appended to ShardSamples.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>

#include "data/shard_reader.h"

namespace bert {

// Detects or checks the format of an open file and validates its datasets' types and shapes.
ShardHeader read_shard_header(hid_t file, const std::string& path, const ShardLimits& limits,
                              const std::string& format);

class RowDecoder {
 public:
  virtual ~RowDecoder() = default;
  virtual int64_t band_rows() const = 0;
  virtual void read_rows(int64_t begin, int64_t count, ShardSamples& out) = 0;
};

std::unique_ptr<RowDecoder> make_dle_decoder(hid_t file, const ShardHeader& header, const ShardLimits& limits);
std::unique_ptr<RowDecoder> make_mlperf_decoder(hid_t file, const ShardHeader& header, const ShardLimits& limits);

// Which sequence a value belongs to, for messages: "sample 17", or in packed shards "row 17"
// and "row 17, sequence 2".
struct SequenceRef {
  const std::string& file;
  int64_t row = 0;
  int sequence = -1;  // index within a packed row; -1 for the whole row
  bool packed = false;
};

// One decoded sequence before it is stored (views into the decoder's buffers).
struct SequenceView {
  const int32_t* input_ids = nullptr;
  const int32_t* segment_ids = nullptr;
  int64_t tokens = 0;
  const int32_t* masked_lm_positions = nullptr;  // relative to the sequence's first token
  const int32_t* masked_lm_ids = nullptr;
  int64_t predictions = 0;
  int32_t next_sentence_label = 0;
};

// Checks every value of `seq` against `limits` (Error(data) naming file, key and sequence) and
// appends it to `out`.
void append_checked(const SequenceRef& ref, const SequenceView& seq, const ShardLimits& limits, ShardSamples& out);

// Error(data) "<file>: <key> of <sequence>: <message>".
[[noreturn]] void fail_sequence(const SequenceRef& ref, const std::string& key, const std::string& message);

}  // namespace bert
