// TFRecord -> HDF5: converts files of tf.train.Examples as Google's create_pretraining_data.py
// and MLPerf's BERT scripts write them (int64 features input_ids, input_mask, segment_ids
// [max_seq_length], masked_lm_positions, masked_lm_ids [max_predictions], next_sentence_labels
// [1], float masked_lm_weights [max_predictions]) into DLE or MLPerf shards, one shard per input
// file (PART -> OUTPUT_DIR/PART.hdf5), through the same writer as `bert-prep shards`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prep/shard_writer.h"

namespace bert {

struct TfRecordConvertOptions {
  std::string output_dir;
  ShardOutputFormat format = ShardOutputFormat::dle;
  int gzip_level = 1;
  bool overwrite = false;
};

struct TfRecordConvertSummary {
  uint64_t files = 0, records = 0, predictions = 0, tokens = 0, bytes_written = 0;
  int max_seq_length = 0, max_predictions = 0;  // as found in the records
  std::vector<std::string> outputs;
};

// Every record is validated (features present with consistent lengths, input_mask a run of ones,
// segment ids 0...0 1...1, masked_lm_weights ones then zeros, positions inside the sequence,
// labels 0/1); Error(data) names the file, record and feature at fault. Inputs may be
// directories (their regular files, sorted).
TfRecordConvertSummary convert_tfrecords(const std::vector<std::string>& inputs, const TfRecordConvertOptions& options);

}  // namespace bert
