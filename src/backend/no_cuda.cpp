// The CUDA entry points of a build without CUDA: asking for a GPU reports that, and there is no
// thread device to keep.
#include "backend/ops.h"
#include "backend/thread_device.h"

namespace bert {

std::unique_ptr<Ops> make_cuda_ops(int) { return nullptr; }
std::unique_ptr<Ops> make_cuda_ops(int, const CudaOptions&) { return nullptr; }
bool cuda_available() { return false; }

ThreadDevice::ThreadDevice(bool, int) {}
ThreadDevice::~ThreadDevice() = default;

}  // namespace bert
