// CudaOps::record: the work a body queues on the backend's stream, captured into a CUDA graph
// and instantiated once; replay() launches it on the same stream. Thread-local capture mode: a
// call of this thread that would wait for the device inside it fails the capture instead of
// running, while other threads (the host's own, NCCL's proxy threads for the buckets a
// recording may hold) keep working as they do (nccl-tests captures so too).
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace bert {
namespace {

class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, const DeviceMemory& memory, uint64_t releases)
      : exec_(exec), stream_(stream), memory_(memory), releases_(releases) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool replay() override {
    if (memory_.releases() != releases_) return false;  // a buffer it reads or writes was freed
    CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    return true;
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  const DeviceMemory& memory_;
  uint64_t releases_;
};

}  // namespace

std::unique_ptr<RecordedWork> CudaOps::record(const std::function<void()>& body) {
  const uint64_t releases = memory_->releases();
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);  // ends the (possibly invalidated) capture
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess) {
    cudaGetLastError();
    const char* why = ended == cudaErrorStreamCaptureUnjoined
                          ? "a stream that joined the recording through an event was not joined back"
                          : "a call inside it waited for the device or allocated memory";
    fail(Code::backend, "recording the work as a CUDA graph failed: ", cudaGetErrorString(ended), " (", why,
         "); config key 'train.cuda_graphs' = false "
         "runs the step without graphs");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(made);
  return std::make_unique<CudaGraph>(exec, stream_, *memory_, releases);
}

void CudaOps::refresh_weights() {
  if (WeightMirror* mirror = gemm_->weights()) mirror->refresh();
}

}  // namespace bert
