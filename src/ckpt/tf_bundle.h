// TensorFlow's tensor-bundle checkpoint format (what tf.compat.v1.train.Saver and
// tf.train.Checkpoint write), read without TensorFlow: PREFIX.index is a sorted-string table
// (ckpt/sstable.h) mapping each tensor name to a BundleEntryProto (dtype, shape, shard, offset,
// size, masked CRC-32C of the bytes) and the empty key to a BundleHeaderProto (shard count,
// endianness); PREFIX.data-NNNNN-of-MMMMM hold the raw little-endian tensor bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace bert {

struct TfBundleEntry {
  std::string name;
  int dtype = 0;  // TensorFlow's DataType enum (1 float, 2 double, 3 int32, 9 int64, 14 bfloat16, 19 half, ...)
  std::vector<int64_t> shape;
  int shard_id = 0;
  uint64_t offset = 0, size = 0;
  uint32_t masked_crc32c = 0;
  bool sliced = false;  // a partitioned variable (its data lives in slice entries)
};

struct TfBundle {
  std::string prefix;  // path without ".index"
  int num_shards = 1;
  std::vector<TfBundleEntry> entries;  // in name order
};

// The checkpoint prefix of `source` (PREFIX.index, or PREFIX itself when PREFIX.index exists),
// or "" when `source` is not a TensorFlow checkpoint.
std::string tf_checkpoint_prefix(const std::string& source);
// Reads and checks the index (Error(checkpoint) naming the file and entry at fault).
TfBundle read_tf_bundle(const std::string& prefix);
// "float32", "int64", ... for messages and listings.
std::string tf_dtype_name(int dtype);
// The tensor's raw bytes after checking its size against its shape and dtype and its CRC-32C;
// Error(checkpoint) naming the data file and tensor otherwise (Error(unsupported) for dtypes
// without a fixed width and partitioned variables).
std::vector<char> read_tf_bytes(const TfBundle& bundle, const TfBundleEntry& entry);
// The tensor's values as fp32 (float, double, half, bfloat16, int32, int64 entries), after
// checking its size and CRC-32C; Error(checkpoint) naming the data file and tensor otherwise.
CheckpointTensor read_tf_tensor(const TfBundle& bundle, const TfBundleEntry& entry);

}  // namespace bert
