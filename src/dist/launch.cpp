// resolve_launch: rank/world/local rank from the host's bert_dist, else from the launcher's
// environment (Open MPI, then Slurm, then torchrun-style RANK/WORLD_SIZE), else one rank; and
// the backend: NCCL for GPU ranks, MPI for CPU ranks, local for a single rank.
#include "dist/launch.h"

#include <cstdlib>

#include "core/error.h"

namespace bert {
namespace {

struct EnvScheme {
  const char* name;
  const char* rank;
  const char* world;
  const char* local_rank;
};

// In order of precedence: a launcher's own variables beat the generic torchrun ones.
constexpr EnvScheme kSchemes[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

int env_int(const EnvLookup& env, const char* key, int fallback) {
  std::optional<std::string> v = env(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const int value = std::stoi(*v, &used);
    if (used == v->size() && value >= 0) return value;
  } catch (const std::exception&) {
  }
  fail(Code::config, "environment variable ", key, "=\"", *v, "\" is not a non-negative integer");
}

const char* backend_name(DistBackend b) {
  switch (b) {
    case DistBackend::automatic: return "auto";
    case DistBackend::local: return "local";
    case DistBackend::mpi: return "mpi";
    case DistBackend::nccl: return "nccl";
  }
  return "?";
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& key) -> std::optional<std::string> {
    const char* v = std::getenv(key.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

LaunchPlan resolve_launch(const DistRequest& request, const EnvLookup& env) {
  LaunchPlan plan;
  plan.timeout_s = request.timeout_s;
  plan.nccl_unique_id = request.nccl_unique_id;
  plan.source = "default";
  plan.rank = -1;
  plan.world_size = -1;
  plan.local_rank = -1;
  if (request.backend != DistBackend::local) {
    for (const EnvScheme& s : kSchemes) {
      if (!env(s.rank) || !env(s.world)) continue;
      plan.rank = env_int(env, s.rank, 0);
      plan.world_size = env_int(env, s.world, 1);
      plan.local_rank = env_int(env, s.local_rank, -1);
      plan.source = s.name;
      break;
    }
  }
  if (request.rank >= 0 || request.world_size >= 0) plan.source = "bert_dist";
  if (request.rank >= 0) plan.rank = request.rank;
  if (request.world_size >= 0) plan.world_size = request.world_size;
  if (request.local_rank >= 0) plan.local_rank = request.local_rank;
  if (plan.world_size < 0) plan.world_size = 1;
  if (plan.rank < 0) plan.rank = 0;
  if (plan.world_size < 1 || plan.rank >= plan.world_size) {
    fail(Code::config, "distributed setup from ", plan.source, ": rank ", plan.rank, " is outside world size ",
         plan.world_size);
  }
  // Without a launcher's local rank, ranks are assumed to fill one machine.
  if (plan.local_rank < 0) plan.local_rank = plan.rank;

  plan.backend = request.backend;
  if (plan.backend == DistBackend::automatic) {
    if (plan.world_size == 1) {
      plan.backend = DistBackend::local;
    } else if (request.gpu && nccl_built()) {
      plan.backend = DistBackend::nccl;
    } else {
      plan.backend = DistBackend::mpi;
    }
  }
  if (plan.backend == DistBackend::local && plan.world_size != 1) {
    fail(Code::config, "bert_dist backend local runs one rank, but the world size from ", plan.source, " is ",
         plan.world_size);
  }
  if (plan.backend == DistBackend::mpi && request.gpu) {
    fail(Code::unsupported, "distributed backend mpi reduces host memory; with a CUDA device use backend nccl "
         "(or auto)");
  }
  if ((plan.backend == DistBackend::mpi && !mpi_built()) || (plan.backend == DistBackend::nccl && !nccl_built())) {
    fail(Code::unsupported, "distributed backend ", backend_name(plan.backend), " (world size ", plan.world_size,
         " from ", plan.source, ") is not built into this bertengine (build with -D",
         plan.backend == DistBackend::mpi ? "mpi" : "cuda", "=enabled)");
  }
  return plan;
}

std::unique_ptr<Communicator> make_communicator(const LaunchPlan& plan) {
  switch (plan.backend) {
    case DistBackend::mpi: return make_mpi_communicator(plan);
    case DistBackend::nccl: return make_nccl_communicator(plan);
    default: return make_local_communicator();
  }
}

}  // namespace bert
