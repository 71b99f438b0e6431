// Dropout (+ residual) forward and dropout backward with counter-based Philox (core/philox.h).
// Each thread owns one Philox group of four consecutive element indices, so the mask equals the
// CPU's bit for bit: element i is kept when philox_uniform_at(seed, step, tensor_id, i) >= p.
// Tensors are of any activation storage type; the arithmetic is fp32, rounded once on store.
#include "kernels/dropout.h"
#include "common.cuh"
#include "core/philox.h"

namespace bert::kernels {
namespace {

// Elements [0, n) carry Philox indices [base, base + n); group g covers indices 4g..4g+3.
template <typename T>
__global__ void dropout_fwd_kernel(T* out, const T* in, const T* residual, int64_t n, DropoutSite site,
                                   float keep_scale, int64_t base) {
  const int64_t first_group = base >> 2;
  const int64_t groups = ((base + n + 3) >> 2) - first_group;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t group = static_cast<uint64_t>(first_group + g);
    const Philox4 r = philox_block(site.seed, step_of(site), site.tensor_id, group);
    for (int j = 0; j < 4; ++j) {
      const int64_t e = static_cast<int64_t>(group) * 4 + j - base;  // element of this call
      if (e < 0 || e >= n) continue;
      // __fmul_rn keeps nvcc from contracting the residual add into an FMA: bits match the CPU.
      const float dropped = philox_uniform(r.v[j]) >= site.p ? __fmul_rn(load(in + e), keep_scale) : 0.0f;
      store(out + e, residual != nullptr ? dropped + load(residual + e) : dropped);
    }
  }
}

template <typename T>
__global__ void residual_add_kernel(T* out, const T* in, const T* residual, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store(out + i, residual != nullptr ? load(in + i) + load(residual + i) : load(in + i));
}

}  // namespace

void dropout_residual_fwd(Act out, ConstAct in, ConstAct residual, int64_t n, const DropoutSite& site,
                          float keep_scale, int64_t index_base, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(common_storage("dropout_residual_fwd", {out, in, residual}), [&](auto tag) {
    using T = decltype(tag);
    if (site.p == 0.0f) {
      residual_add_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(typed<T>(out), typed<T>(in), typed<T>(residual),
                                                                    n);
    } else {
      const int64_t groups = ((index_base + n + 3) >> 2) - (index_base >> 2);
      dropout_fwd_kernel<T><<<grid_for(groups), kThreads, 0, stream>>>(
          typed<T>(out), typed<T>(in), typed<T>(residual), n, site, keep_scale, index_base);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

void dropout_bwd(Act din, ConstAct dout, int64_t n, const DropoutSite& site, float keep_scale,
                 cudaStream_t stream) {
  // The backward mask is the forward mask applied to the gradient with no residual.
  dropout_residual_fwd(din, dout, nullptr, n, site, keep_scale, 0, stream);
}

}  // namespace bert::kernels
