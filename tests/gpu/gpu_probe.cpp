// The first program a GPU session runs (run_bundle.sh, before the suite): a line for each thing
// it learns, so that even a run cut short says what the machine is — the driver's and the
// libraries' versions (CUDA runtime and driver, cuBLASLt, cuDNN and the frontend headers it was
// built with, NCCL), the GPU's properties, then the engine's CUDA backend created plain (cuBLASLt
// handle, its GELU-epilogue probe) and with cuDNN's fused attention (a cuDNN handle).
// Exits 77 without a device, 1 when a step fails.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "backend/ops.h"
#ifdef BERT_PROBE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend_version.h>
#endif

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  int runtime = 0, driver = 0, devices = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("versions: CUDA runtime %d, driver supports CUDA %d\n", runtime, driver);
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipping\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::printf("versions: cuBLASLt %zu, NCCL %d\n", cublasLtGetVersion(), nccl);
#ifdef BERT_PROBE_CUDNN
  std::printf("versions: cuDNN %zu (headers %d), cudnn-frontend %d\n", cudnnGetVersion(), CUDNN_VERSION,
              CUDNN_FRONTEND_VERSION);
#else
  std::printf("versions: built without cudnn-frontend (no fused attention)\n");
#endif
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, d);
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, shared memory per block up to %zu KiB\n", d,
                p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0,
                p.l2CacheSize >> 20, p.sharedMemPerBlockOptin >> 10);
  }
  std::fflush(stdout);
  const struct {
    const char* what;
    bert::CudaOptions options;
  } backends[] = {{"cuda:0 bf16", {bert::Precision::bf16}},
                  {"cuda:0 bf16 with 16-bit activations", {bert::Precision::bf16, false, false, true}},
                  {"cuda:0 bf16 with cuDNN fused attention", {bert::Precision::bf16, true}}};
  int failed = 0;
  for (const auto& b : backends) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const auto ops = bert::make_cuda_ops(0, b.options);
      std::printf("backend %s: created as %s (%.0f ms)\n", b.what, ops->name().c_str(), ms_since(t0));
    } catch (const std::exception& e) {
      std::printf("backend %s: FAILED: %s\n", b.what, e.what());
      ++failed;
    }
    std::fflush(stdout);
  }
  return failed ? 1 : 0;
}
