// A deliberately over-sized kernel for test_kernel_resources.py: about 100 live floats a thread
// and no __launch_bounds__, so it needs more than the 64 registers a thread a 1024-thread block
// can have, and check_kernel_resources.py must name it.
namespace bert::kernels {

__global__ void register_hungry_kernel(float* out, const float* in) {
  constexpr int kLive = 100;
  float acc[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) acc[i] = in[threadIdx.x * kLive + i];
#pragma unroll
  for (int round = 0; round < 4; ++round) {
#pragma unroll
    for (int i = 0; i < kLive; ++i) acc[i] = acc[i] * acc[(i + round + 1) % kLive] + 1.0f;
  }
#pragma unroll
  for (int i = 0; i < kLive; ++i) out[threadIdx.x * kLive + i] = acc[i];
}

}  // namespace bert::kernels
