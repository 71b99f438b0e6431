// Rank-balanced micro-batches ("exchange padding" of the MLPerf BERT submissions): the ranks
// pool the micro-batches they drew and deal the samples out again, longest first, each to the
// rank with the fewest real tokens so far, so that with unpadded execution no rank waits for
// the one that happened to draw the longest sequences. The global set of samples is unchanged.
#pragma once

#include "data/batch.h"
#include "dist/communicator.h"

namespace bert {

// COLLECTIVE. Every rank passes a batch of the same shape; returns this rank's balanced batch.
HostBatch balance_across_ranks(const HostBatch& mine, Communicator& comm);

}  // namespace bert
