// WeightMirror: registration, lazy re-cast and lookup of the low-precision parameter copy.
#include "backend/cuda/weight_mirror.h"

#include <functional>

#include "backend/cuda/cuda_check.h"

namespace bert {

WeightMirror::~WeightMirror() {
  if (mirror_ == nullptr) return;
  try {
    memory_.release(mirror_);
  } catch (const Error&) {
    // Destructors must not throw; the device is being torn down anyway.
  }
}

void WeightMirror::assign(const float* params, int64_t n) {
  BERT_CHECK(n >= 0 && (n == 0 || params != nullptr), Code::invalid_argument,
             "set_weights: bad parameter range of ", n, " elements at ",
             static_cast<const void*>(params));
  if (mirror_ != nullptr) {
    memory_.release(mirror_);
    mirror_ = nullptr;
  }
  base_ = n > 0 ? params : nullptr;
  n_ = n;
  if (n > 0) mirror_ = memory_.alloc(static_cast<size_t>(n) * 2);
  stale_ = true;
}

void WeightMirror::refresh() {
  if (!stale_ || base_ == nullptr) return;
  kernels::cast_to_lowp(mirror_, base_, n_, 1.0f, kind_, stream_);
  stale_ = false;
  ++refreshes_;
}

const void* WeightMirror::find(const float* p, int64_t span) {
  if (base_ == nullptr || p == nullptr) return nullptr;
  // std::less gives a total order on pointers into different allocations.
  const std::less<const float*> before;
  if (before(p, base_) || before(base_ + n_, p) || span > (base_ + n_) - p) return nullptr;
  refresh();
  return static_cast<const char*>(mirror_) + (p - base_) * 2;
}

}  // namespace bert
