// GradientSync: the data-parallel gradient all-reduce of one step, in buckets. During the last
// micro-batch's backward pass the model reports which gradients are final (everything at flat
// offset >= some point: heads, then layers last to first, then embeddings); each time at least
// bucket_mb of them are waiting, a non-blocking sum of that contiguous range starts, so the
// reduction overlaps the rest of the backward pass. finish() starts what is left and waits.
// Every rank cuts the same buckets: the offsets come from the model, the size from the config.
// Joined buckets (CUDA graphs): once the backward pass is done the sums are joined to the backend's
// stream instead of waited for, so a recording of the backward pass holds them too and a replay
// queues them again; finish() then waits for that stream.
#pragma once

#include <cstdint>

#include "dist/communicator.h"

namespace bert {

class GradientSync {
 public:
  // grads: the flat gradient buffer of n floats (backend memory); stream: Ops::native_stream();
  // joins: join the buckets to the stream (above).
  GradientSync(Communicator& comm, float* grads, int64_t n, double bucket_mb, WirePrecision wire, void* stream,
               bool joins);

  // Whether buckets may start during backward (bucket_mb > 0).
  bool overlaps() const { return bucket_elems_ > 0; }
  // BackwardOptions::on_grads_ready: gradients at offset >= `offset` are final.
  void grads_ready(int64_t offset);
  // Joined buckets: a replay of recorded work queued every bucket and the join again.
  void replayed();
  // Starts the rest of the buffer (all of it when nothing started) and waits for every sum.
  void finish();
  // After a failed backward: waits for the buckets already started (their peers started them
  // too) and forgets the rest, so the next step starts clean. Never throws.
  void drain() noexcept;

 private:
  void start(int64_t offset);

  Communicator& comm_;
  float* grads_;
  int64_t n_;
  int64_t bucket_elems_;
  WirePrecision wire_;
  void* stream_;
  bool joins_;
  int64_t started_from_;  // gradients at offset >= this are on their way
  bool joined_ = false;   // every bucket started and joined to stream_
};

}  // namespace bert
