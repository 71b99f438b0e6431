// GradientSync: bucketed, overlapping gradient all-reduce (see gradient_sync.h).
#include "session/gradient_sync.h"

#include <cmath>

namespace bert {

GradientSync::GradientSync(Communicator& comm, float* grads, int64_t n, double bucket_mb, WirePrecision wire,
                           void* stream, bool joins)
    : comm_(comm),
      grads_(grads),
      n_(n),
      bucket_elems_(static_cast<int64_t>(std::llround(bucket_mb * 1048576.0 / sizeof(float)))),
      wire_(wire),
      stream_(stream),
      joins_(joins),
      started_from_(n) {
  if (bucket_mb > 0 && bucket_elems_ < 1) bucket_elems_ = 1;
}

void GradientSync::grads_ready(int64_t offset) {
  if (!overlaps() || offset >= started_from_) return;
  if (started_from_ - offset >= bucket_elems_ || offset == 0) start(offset);
  if (offset == 0 && joins_) {
    comm_.join_allreduce_sums(stream_);
    joined_ = true;
  }
}

void GradientSync::replayed() {
  started_from_ = 0;
  joined_ = true;
}

void GradientSync::start(int64_t offset) {
  comm_.start_allreduce_sum(grads_ + offset, started_from_ - offset, wire_, stream_);
  started_from_ = offset;
}

void GradientSync::finish() {
  const bool joined = joined_;
  joined_ = false;
  if (joined) {
    started_from_ = n_;
    comm_.wait_for_stream(stream_);
    return;
  }
  if (started_from_ > 0) start(0);
  started_from_ = n_;
  comm_.finish_allreduce_sums();
}

void GradientSync::drain() noexcept {
  const bool started = started_from_ < n_, joined = joined_;
  started_from_ = n_;
  joined_ = false;
  if (!started) return;
  try {
    if (joined) comm_.wait_for_stream(stream_);
    else comm_.finish_allreduce_sums();
  } catch (...) {
  }
}

}  // namespace bert
