// bert-prep shards: raw text -> pretraining shards. Documents are indexed (byte ranges only),
// shuffled with the seed, and dealt into N train shards plus held-out eval shards; each shard is
// then an independent create_pretraining_data run over its own documents (as DLE does per shard:
// random next segments come from the same shard), built by a pool of threads and written as
// soon as it is done. Peak memory is a few shards, not the corpus; a seed fixes every byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prep/pretraining_instances.h"
#include "prep/shard_writer.h"
#include "prep/text_corpus.h"
#include "text/tokenizer.h"

namespace bert {

struct ShardBuildOptions {
  std::vector<std::string> inputs;  // files or directories (*.txt, recursive)
  std::string output_dir;           // gets train/ and eval/ with shard_NNNNN.hdf5
  DocumentMode documents = DocumentMode::blank_line;
  SentenceMode sentences = SentenceMode::line;
  InstanceOptions instances;
  ShardWriteOptions write;
  int dupe_factor = 10;
  int num_shards = 0;  // 0: max(threads, one per 32 MB of text)
  double eval_fraction = 0.01;
  int eval_shards = 1;
  uint64_t seed = 12345;
  int threads = 0;  // 0: all cores
  bool overwrite = false;
};

struct ShardBuildSummary {
  uint64_t files = 0, input_bytes = 0, documents = 0, empty_documents = 0, sentences = 0;
  uint64_t train_instances = 0, eval_instances = 0, train_shards = 0, eval_shards = 0, bytes_written = 0;
  uint64_t empty_shards = 0;
  TokenizeCounts tokens;
  MaskCounts masks;
  double seconds = 0;
};

ShardBuildSummary build_shards(const ShardBuildOptions& options, const Tokenizer& tokenizer);

}  // namespace bert
