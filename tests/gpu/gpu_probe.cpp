// The first program a GPU session runs (run_bundle.sh, before the suite): a line for each thing
// it learns, so that even a run cut short says what the machine is — the driver's and the
// libraries' versions (CUDA runtime and driver, cuBLASLt, cuDNN and the frontend headers it was
// built with, NCCL), the GPU's properties, then the engine's CUDA backend created plain (cuBLASLt
// handle, its GELU-epilogue probe) and with cuDNN's fused attention (a cuDNN handle), then one op
// of each kind (probe_steps.h: a kernel, a GEMM per precision, the fused attention uniform, ragged
// and with dropout, a CUDA graph) and a one-rank NCCL all-reduce, a line after each.
// Exits 77 without a device, 1 when a step fails.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "probe_steps.h"
#ifdef BERT_PROBE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend_version.h>
#endif

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ncclAllReduce (sum) of 1024 ones on one rank of device 0: ones again.
std::string nccl_step() {
  int device = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t made = ncclCommInitAll(&comm, 1, &device);
  if (made != ncclSuccess) throw std::runtime_error(std::string("ncclCommInitAll: ") + ncclGetErrorString(made));
  const size_t n = 1024;
  std::vector<float> host(n, 1.0f);
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  std::string error;
  if (cudaMalloc(&buf, n * sizeof(float)) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
      cudaMemcpy(buf, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
    error = "CUDA setup failed";
  } else {
    const ncclResult_t st = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream);
    if (st != ncclSuccess) error = std::string("ncclAllReduce: ") + ncclGetErrorString(st);
    else if (cudaStreamSynchronize(stream) != cudaSuccess) error = "the all-reduce failed on the stream";
    else if (cudaMemcpy(host.data(), buf, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) error = "copy back";
    else
      for (float v : host)
        if (v != 1.0f) error = "a sum is not 1";
  }
  if (buf != nullptr) cudaFree(buf);
  if (stream != nullptr) cudaStreamDestroy(stream);
  ncclCommDestroy(comm);
  if (!error.empty()) throw std::runtime_error(error);
  return "1024 floats summed on one rank, values right";
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
#ifdef BERT_PROBE_CUDNN
  const bool fused = true;
#else
  const bool fused = false;
#endif
  std::vector<bert::probe::Line> lines = bert::probe::op_steps(fused);
  lines.push_back(bert::probe::run_step("nccl all-reduce, one rank", nccl_step));
  for (const auto& line : lines) {
    std::printf("step %s: %s %s (%.0f ms)\n", line.step.c_str(), line.ok ? "ok," : "FAILED:", line.detail.c_str(),
                line.ms);
    failed += line.ok ? 0 : 1;
  }
  return failed ? 1 : 0;
}
