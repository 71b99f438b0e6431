// Activation kernels for dense layers whose activation is not fused into the cuBLASLt
// epilogue: out = act(pre) forward and dpre = dout ⊙ act'(pre) backward, elementwise.
#include "activation.cuh"
#include "kernels/activation.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

template <Activation A>
__global__ void activation_fwd_kernel(float* out, const float* pre, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = activate<A>(pre[i]);
}

template <Activation A>
__global__ void activation_bwd_kernel(float* dpre, const float* dout, const float* pre, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dpre[i] = dout[i] * activation_grad<A>(pre[i]);
}

template <template <Activation> class Launch, typename... Args>
void dispatch(Activation act, Args... args) {
  switch (act) {
    case Activation::none: Launch<Activation::none>::run(args...); break;
    case Activation::gelu_erf: Launch<Activation::gelu_erf>::run(args...); break;
    case Activation::gelu_tanh: Launch<Activation::gelu_tanh>::run(args...); break;
    case Activation::tanh: Launch<Activation::tanh>::run(args...); break;
  }
}

template <Activation A>
struct LaunchFwd {
  static void run(float* out, const float* pre, int64_t n, cudaStream_t stream) {
    activation_fwd_kernel<A><<<grid_for(n), kThreads, 0, stream>>>(out, pre, n);
  }
};

template <Activation A>
struct LaunchBwd {
  static void run(float* dpre, const float* dout, const float* pre, int64_t n,
                  cudaStream_t stream) {
    activation_bwd_kernel<A><<<grid_for(n), kThreads, 0, stream>>>(dpre, dout, pre, n);
  }
};

}  // namespace

void activation_fwd(float* out, const float* pre, int64_t n, Activation act, cudaStream_t stream) {
  if (n == 0) return;
  dispatch<LaunchFwd>(act, out, pre, n, stream);
  CUDA_CHECK(cudaGetLastError());
}

void activation_bwd(float* dpre, const float* dout, const float* pre, int64_t n, Activation act,
                    cudaStream_t stream) {
  if (n == 0) return;
  dispatch<LaunchBwd>(act, dpre, dout, pre, n, stream);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
