// All-reduce bandwidth benchmark, like nccl-tests' all_reduce_perf: for each message size, the
// time of an in-place float sum through bertengine's Communicator (MPI on host memory, or NCCL
// on device memory with --backend nccl) and the algorithm / bus bandwidth it reaches
// (busbw = algbw · 2(W-1)/W, the per-link traffic of a ring). For MPI the same sizes are timed
// with a plain blocking MPI_Allreduce as the peer, so the cost of the non-blocking,
// deadline-polled path is visible. --wire bf16|fp16 times the gradient path instead (start +
// finish of one bucket: cast, 16-bit sum, cast back); bandwidths there count fp32 gradient
// bytes, so they compare directly with the fp32 rows. Run under mpirun: mpirun -np 2
// bench_allreduce_mpi.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/ops.h"
#include "core/error.h"
#include "dist/launch.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double seconds_per_call(F&& call, int iters) {
  for (int i = 0; i < 3; ++i) call();  // warm-up
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) call();
  double local = std::chrono::duration<double>(Clock::now() - t0).count() / iters, slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "mpi", wire_name = "fp32";
  long long max_bytes = 64ll << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend")) backend = argv[i + 1];
    if (!std::strcmp(argv[i], "--max-bytes")) max_bytes = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--wire")) wire_name = argv[i + 1];
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rc = 0;
  try {
    bert::DistRequest request;
    request.backend = backend == "nccl" ? bert::DistBackend::nccl : bert::DistBackend::mpi;
    request.gpu = backend == "nccl";
    const bert::WirePrecision wire = bert::parse_wire_precision(wire_name);
    const bert::LaunchPlan plan = bert::resolve_launch(request, bert::process_env());
    std::unique_ptr<bert::Ops> ops = backend == "nccl" ? bert::make_cuda_ops(plan.local_rank) : bert::make_cpu_ops(1);
    if (!ops) bert::fail(bert::Code::unsupported, "backend ", backend, " needs CUDA, which this build lacks");
    std::unique_ptr<bert::Communicator> comm = bert::make_communicator(plan);
    const int world = comm->world_size();
    const double ring = 2.0 * (world - 1) / world;
    float* buf = static_cast<float*>(ops->alloc(max_bytes));
    std::vector<float> host(max_bytes / sizeof(float), 1.0f);
    if (comm->rank() == 0) {
      std::printf("# all-reduce sum, float, in place, %d ranks, backend %s (%s), %s on the wire\n", world,
                  comm->name().c_str(), ops->name().c_str(), wire_name.c_str());
      std::printf("%12s %10s %12s %10s %10s%s\n", "bytes", "elements", "time_us", "algbw_GB/s", "busbw_GB/s",
                  backend == "mpi" ? "   peer:MPI_Allreduce time_us busbw_GB/s" : "");
    }
    for (long long bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      const int64_t n = bytes / sizeof(float);
      const int iters = bytes <= (1 << 20) ? 50 : 10;
      const double t = seconds_per_call(
          [&] {
            if (wire == bert::WirePrecision::fp32) {
              comm->allreduce_sum(buf, n);
            } else {
              comm->start_allreduce_sum(buf, n, wire, ops->native_stream());
              comm->finish_allreduce_sums();
            }
          },
          iters);
      ops->synchronize();
      double peer = 0;
      if (backend == "mpi") {
        peer = seconds_per_call(
            [&] { MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, iters);
      }
      if (comm->rank() == 0) {
        const double algbw = bytes / t / 1e9;
        std::printf("%12lld %10lld %12.1f %10.3f %10.3f", bytes, static_cast<long long>(n), t * 1e6, algbw, algbw * ring);
        if (backend == "mpi") std::printf("   %28.1f %10.3f", peer * 1e6, bytes / peer / 1e9 * ring);
        std::printf("\n");
      }
    }
    ops->release(buf);
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
