// WeightMirror: one low-precision (bf16/fp16) copy of the registered fp32 parameter range, so
// mixed-precision GEMMs read weights without casting them on every call. It is re-cast lazily,
// by one kernel over the whole range, on the first lookup after invalidate() (every writer of
// the parameters calls Ops::weights_changed()). Its bytes come from DeviceMemory (peak_bytes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/cuda_memory.h"
#include "kernels/cast.h"

namespace bert {

class WeightMirror {
 public:
  WeightMirror(DeviceMemory& memory, cudaStream_t stream, kernels::LowPrecision kind)
      : memory_(memory), stream_(stream), kind_(kind) {}
  ~WeightMirror();
  WeightMirror(const WeightMirror&) = delete;
  WeightMirror& operator=(const WeightMirror&) = delete;

  // Registers params[0, n) (device memory) and allocates its mirror; the mirror starts stale.
  void assign(const float* params, int64_t n);
  void invalidate() { stale_ = true; }
  // Re-casts the mirror now if it is stale (one kernel on the stream).
  void refresh();
  // The mirror of [p, p + span) when that lies inside the registered range (re-cast first when
  // stale), else null.
  const void* find(const float* p, int64_t span);
  int64_t refreshes() const { return refreshes_; }

 private:
  DeviceMemory& memory_;
  cudaStream_t stream_;
  kernels::LowPrecision kind_;
  const float* base_ = nullptr;
  int64_t n_ = 0;
  void* mirror_ = nullptr;  // [n] 16-bit values
  bool stale_ = true;
  int64_t refreshes_ = 0;
};

}  // namespace bert
