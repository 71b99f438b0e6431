// Where a rank learns its place in a distributed run: the host's bert_dist values, or the
// environment its launcher set (Open MPI, Slurm, torchrun-style). resolve_launch() turns the
// request into a LaunchPlan (rank, world, local rank, backend); make_communicator() builds it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dist/communicator.h"

namespace bert {

enum class DistBackend { automatic, local, mpi, nccl };

// NCCL's unique id, as the host carries it (ncclUniqueId's size; checked where NCCL is used).
constexpr size_t kNcclUniqueIdBytes = 128;
using NcclUniqueId = std::array<unsigned char, kNcclUniqueIdBytes>;

// What the host asked for (bert_dist); -1 means "from the environment".
struct DistRequest {
  DistBackend backend = DistBackend::automatic;
  int rank = -1, world_size = -1, local_rank = -1;
  std::optional<NcclUniqueId> nccl_unique_id;
  double timeout_s = 300;  // dist.timeout_s: the longest any collective may wait for a peer
  bool gpu = false;        // device is "cuda…": the automatic backend is then NCCL
};

struct LaunchPlan {
  DistBackend backend = DistBackend::local;
  int rank = 0, world_size = 1, local_rank = 0;
  std::string source;  // where rank/world came from: "bert_dist", "Open MPI", "Slurm", "RANK/WORLD_SIZE", "default"
  std::optional<NcclUniqueId> nccl_unique_id;
  double timeout_s = 300;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Throws Error(config) on inconsistent values (rank outside [0, world), a non-number in an
// environment variable) and Error(unsupported) when the backend is not built in.
LaunchPlan resolve_launch(const DistRequest& request, const EnvLookup& env);

// The communicator of a plan (collective across its ranks).
std::unique_ptr<Communicator> make_communicator(const LaunchPlan& plan);

// Built-in backends. Without MPI / NCCL in this build these throw Error(unsupported).
bool mpi_built();
// bert_finalize: finalises MPI if a communicator of this library initialised it; throws
// Error(invalid_argument) while MPI communicators still exist.
void finalize_distributed();
bool nccl_built();
std::unique_ptr<Communicator> make_mpi_communicator(const LaunchPlan& plan);
std::unique_ptr<Communicator> make_nccl_communicator(const LaunchPlan& plan);
// A fresh NCCL unique id (rank 0 makes it; the host carries it to every rank).
NcclUniqueId nccl_unique_id();

}  // namespace bert
