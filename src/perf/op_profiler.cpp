// OpProfiler: each observed call timed between two synchronisations (see the header).
#include "perf/op_profiler.h"

namespace bert {

void OpProfiler::before(Ops& ops, const char* op) {
  (void)op;
  ops.synchronize();
  start_ = std::chrono::steady_clock::now();
}

void OpProfiler::after(Ops& ops, const char* op) {
  ops.synchronize();
  OpTiming& t = timings_[op];
  t.calls += 1;
  t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace bert
