// WireSpace: where NCCL's 16-bit gradient buckets put their wire words in one device buffer, and
// when that buffer must grow. Host-side bookkeeping only (the communicator allocates), so the
// policy is tested without a GPU. Buckets of one step stay in flight together, so they take
// consecutive slices. The first step, run directly, grows the buffer as it goes (each growth
// waits for the sums in flight); once the host has waited for a step's sums the buffer grows to
// the largest step seen, so later steps, recorded as CUDA graphs that hold the buffer by address,
// fit without growing. A growth while a graph records, or once one holds the buffer, would leave
// it reading freed memory: Error(internal) instead.
#pragma once

#include <cstddef>

namespace bert {

class WireSpace {
 public:
  struct Slice {
    size_t offset = 0;   // of the bucket's words in the buffer
    size_t grow_to = 0;  // non-zero: wait for the sums in flight, then reallocate the buffer to this many bytes
  };
  // A bucket of `bytes` in the current step (rounded up to 256). `capturing`: a CUDA graph is
  // recording it.
  Slice take(size_t bytes, bool capturing);
  // Every bucket of the step has started: the next bucket begins the next step.
  void end_step();
  // The host has waited for every sum: the size the buffer must grow to now (0: none).
  size_t settled();
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_ = 0;      // the buffer's bytes
  size_t used_ = 0;          // bytes of the slices in flight
  size_t step_ = 0;          // bytes this step's buckets need
  size_t largest_step_ = 0;  // bytes the largest step ended so far needed
  bool held_ = false;        // a CUDA graph holds the buffer by address
};

}  // namespace bert
