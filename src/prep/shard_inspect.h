// bert-prep inspect: reads a shard with the engine's own shard reader (any supported format)
// and reports counts, a length histogram, NSP and masking statistics, and the first samples
// decoded back to text with the vocabulary.
#pragma once

#include <ostream>
#include <string>

#include "text/vocab.h"

namespace bert {

struct InspectOptions {
  int samples_to_show = 3;
  int histogram_bins = 8;
};

// Writes the report to `out`; Error(io/data) naming the file for unreadable or invalid shards.
void inspect_shard_file(const std::string& path, const Vocab& vocab, const InspectOptions& options, std::ostream& out);

// Joins word pieces back into text ("un ##aff ##able" -> "unaffable").
std::string detokenize(const Vocab& vocab, const int32_t* ids, size_t n);

}  // namespace bert
