// Writes one shard of pretraining instances as HDF5, either in the DLE layout (zero-padded
// [N, L] / [N, P] arrays: input_ids i4, input_mask i1, segment_ids i1, masked_lm_positions i4,
// masked_lm_ids i4, next_sentence_labels i1 [N]) or in the MLPerf variable-length layout
// (per-sample vlen int16/int8 arrays, no input_mask). Files are written under a temporary name
// and renamed, so a shard on disk is always complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prep/pretraining_instances.h"

namespace bert {

enum class ShardOutputFormat { dle, mlperf };

struct ShardWriteOptions {
  ShardOutputFormat format = ShardOutputFormat::dle;
  int max_seq_length = 128;
  int max_predictions = 20;
  int gzip_level = 1;  // DLE layout only (with the shuffle filter); 0 stores uncompressed
};

// Writes instances[order[0]], instances[order[1]], ... to `path`. Returns the file size in bytes.
uint64_t write_shard(const std::string& path, const InstanceBuffer& instances, const std::vector<uint32_t>& order,
                     const ShardWriteOptions& options);

}  // namespace bert
