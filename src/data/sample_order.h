// The order in which a rank consumes the samples of one shard: a Fisher-Yates shuffle driven
// by Philox(seed, epoch, file index) (the same on every platform and for every rank sharing the
// file), then this rank's stride (see shard_plan.h), then optional length bucketing.
//
// Length bucketing (bins > 0): bin = (length - 1) * bins / max_seq_length, so 4 bins at 512
// are Samsung's <=128, <=256, <=384, <=512. Walking the shuffled order, each sample joins its
// bin's open group; a group that reaches batch_size samples is emitted as one batch. At the
// end of the shard the unfilled groups are emitted bin by bin and the last (count % batch_size)
// samples are dropped, so a shard yields whole batches and all but at most bins - 1 of them
// hold samples of one bin. The order therefore depends on the batch size.
#pragma once

#include <cstdint>
#include <vector>

#include "data/shard_plan.h"
#include "data/shard_reader.h"

namespace bert {

// A permutation of [0, n).
std::vector<uint32_t> shuffled_indices(uint32_t n, uint64_t seed, uint64_t epoch, uint32_t file);

int length_bin(int length, int bins, int max_seq_length);

struct OrderSpec {
  uint64_t seed = 0;
  bool shuffle = true;
  int bucket_bins = 0;  // 0: no bucketing
  int max_seq_length = 512;
  int batch_size = 1;  // used by bucketing only
};

std::vector<uint32_t> sample_order(const ShardSamples& samples, const ShardSlot& slot, uint64_t epoch,
                                   const OrderSpec& spec);

}  // namespace bert
