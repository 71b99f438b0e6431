// Backend factory used when the engine is built without CUDA: asking for a GPU reports that.
#include "backend/ops.h"

namespace bert {

std::unique_ptr<Ops> make_cuda_ops(int) { return nullptr; }
std::unique_ptr<Ops> make_cuda_ops(int, const CudaOptions&) { return nullptr; }
bool cuda_available() { return false; }

}  // namespace bert
