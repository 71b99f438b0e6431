// Compiled instead of mpi_communicator.cpp when bertengine is built without MPI (-Dmpi=disabled):
// asking for the MPI backend then fails with a clear Error(unsupported).
#include "core/error.h"
#include "dist/launch.h"

namespace bert {

bool mpi_built() { return false; }

void finalize_distributed() {}

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchPlan&) {
  fail(Code::unsupported, "this bertengine was built without MPI (rebuild with -Dmpi=enabled)");
}

}  // namespace bert
