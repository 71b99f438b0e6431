// WireSpace: the 16-bit gradient wire buffer's slices and growth (see wire_space.h).
#include "dist/wire_space.h"

#include <algorithm>

#include "core/error.h"

namespace bert {

WireSpace::Slice WireSpace::take(size_t bytes, bool capturing) {
  bytes = (bytes + 255) / 256 * 256;
  Slice slice;
  if (used_ + bytes > capacity_) {
    BERT_CHECK(!capturing && !held_, Code::internal, "NCCL's 16-bit gradient wire buffer (", capacity_,
               " bytes) would grow to ", step_ + bytes, " while a CUDA graph ", capturing ? "records" : "holds",
               " the buckets");
    slice.grow_to = capacity_ = step_ + bytes;  // everything this step has needed so far
    used_ = 0;
  }
  step_ += bytes;
  held_ = held_ || capturing;
  slice.offset = used_;
  used_ += bytes;
  return slice;
}

void WireSpace::end_step() {
  largest_step_ = std::max(largest_step_, step_);
  step_ = 0;
  used_ = 0;
}

size_t WireSpace::settled() {
  if (capacity_ >= largest_step_) return 0;
  BERT_CHECK(!held_, Code::internal, "NCCL's 16-bit gradient wire buffer (", capacity_, " bytes) would grow to ",
             largest_step_, " while a CUDA graph holds the buckets");
  capacity_ = largest_step_;
  return capacity_;
}

}  // namespace bert
