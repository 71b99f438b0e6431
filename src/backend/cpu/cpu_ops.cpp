// The CPU backend factory and constructor: picks the thread count every op runs with.
#include "backend/cpu/cpu_ops.h"

#include <omp.h>

namespace bert {

CpuOps::CpuOps(int threads) : threads_(threads > 0 ? threads : omp_get_num_procs()) {}

std::unique_ptr<Ops> make_cpu_ops(int threads) { return std::make_unique<CpuOps>(threads); }

}  // namespace bert
