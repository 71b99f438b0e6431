// A seeded synthetic data source: random DLE-layout batches of the configured shape, so
// benchmarks, demos and tests need no files. Sequence lengths vary between S/2 and S.
#pragma once

#include <cstdint>
#include <memory>

#include "data/batch.h"

namespace bert {

struct SyntheticOptions {
  int vocab_size = 30522;
  int seq_length = 128;
  int max_predictions = 20;
  uint64_t seed = 1;
};

std::unique_ptr<DataSource> make_synthetic_source(const SyntheticOptions& options);

}  // namespace bert
