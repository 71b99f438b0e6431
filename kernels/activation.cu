// Activation kernels for dense layers whose activation is not fused into the cuBLASLt
// epilogue: out = act(pre) forward and dpre = dout ⊙ act'(pre) backward, elementwise, in fp32
// registers over tensors stored in any activation type.
#include "activation.cuh"
#include "kernels/activation.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

template <Activation A, typename T>
__global__ void activation_fwd_kernel(T* out, const T* pre, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store(out + i, activate<A>(load(pre + i)));
}

template <Activation A, typename T>
__global__ void activation_bwd_kernel(T* dpre, const T* dout, const T* pre, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store(dpre + i, load(dout + i) * activation_grad<A>(load(pre + i)));
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
  static void run(Act out, ConstAct pre, int64_t n, cudaStream_t stream) {
    with_storage(common_storage("activation_fwd", {out, pre}), [&](auto tag) {
      using T = decltype(tag);
      activation_fwd_kernel<A, T><<<grid_for(n), kThreads, 0, stream>>>(typed<T>(out), typed<T>(pre), n);
    });
  }
};

template <Activation A>
struct LaunchBwd {
  static void run(Act dpre, ConstAct dout, ConstAct pre, int64_t n, cudaStream_t stream) {
    with_storage(common_storage("activation_bwd", {dpre, dout, pre}), [&](auto tag) {
      using T = decltype(tag);
      activation_bwd_kernel<A, T><<<grid_for(n), kThreads, 0, stream>>>(typed<T>(dpre), typed<T>(dout),
                                                                         typed<T>(pre), n);
    });
  }
};

}  // namespace

void activation_fwd(Act out, ConstAct pre, int64_t n, Activation act, cudaStream_t stream) {
  if (n == 0) return;
  dispatch<LaunchFwd>(act, out, pre, n, stream);
  CUDA_CHECK(cudaGetLastError());
}

void activation_bwd(Act dpre, ConstAct dout, ConstAct pre, int64_t n, Activation act, cudaStream_t stream) {
  if (n == 0) return;
  dispatch<LaunchBwd>(act, dpre, dout, pre, n, stream);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
