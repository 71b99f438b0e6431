// Compiled instead of nccl_communicator.cpp when bertengine is built without CUDA/NCCL: asking
// for the NCCL backend or a unique id then fails with a clear Error(unsupported).
#include "core/error.h"
#include "dist/launch.h"

namespace bert {

bool nccl_built() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchPlan&) {
  fail(Code::unsupported, "this bertengine was built without CUDA, so without NCCL (rebuild with -Dcuda=enabled)");
}

NcclUniqueId nccl_unique_id() {
  fail(Code::unsupported, "bert_dist_unique_id needs NCCL: this bertengine was built without CUDA");
}

}  // namespace bert
