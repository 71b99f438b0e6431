// resolve_launch: rank, world size, local rank and backend from bert_dist values or from each
// launcher's environment (a fake environment here), and the errors for inconsistent setups.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "dist/launch.h"

namespace bert {
namespace {

EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Launch, NoLauncherMeansOneLocalRank) {
  LaunchPlan p = resolve_launch(DistRequest{}, fake({}));
  EXPECT_EQ(p.backend, DistBackend::local);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.source, "default");
}

TEST(Launch, OpenMpiEnvironment) {
  LaunchPlan p = resolve_launch(DistRequest{}, fake({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "16"},
                                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(p.source, "Open MPI");
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.world_size, 16);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.backend, DistBackend::mpi);
}

TEST(Launch, SlurmEnvironmentBeatsTorchrunVariables) {
  LaunchPlan p = resolve_launch(DistRequest{}, fake({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"},
                                                     {"SLURM_LOCALID", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(p.source, "Slurm");
  EXPECT_EQ(p.rank, 9);
  EXPECT_EQ(p.world_size, 16);
  EXPECT_EQ(p.local_rank, 1);
}

TEST(Launch, TorchrunEnvironmentWithoutLocalRankFillsOneMachine) {
  LaunchPlan p = resolve_launch(DistRequest{}, fake({{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
  EXPECT_EQ(p.source, "RANK/WORLD_SIZE");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.local_rank, 3);
}

TEST(Launch, DistStructOverridesTheEnvironment) {
  DistRequest r;
  r.rank = 1;
  r.world_size = 2;
  LaunchPlan p = resolve_launch(r, fake({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}}));
  EXPECT_EQ(p.source, "bert_dist");
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.local_rank, 3);  // not given in the struct: still from the environment
}

TEST(Launch, LocalBackendIgnoresTheLauncher) {
  DistRequest r;
  r.backend = DistBackend::local;
  LaunchPlan p = resolve_launch(r, fake({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(p.backend, DistBackend::local);
  EXPECT_EQ(p.world_size, 1);
}

TEST(Launch, GpuRanksUseNcclWhenBuilt) {
  DistRequest r;
  r.gpu = true;
  if (!nccl_built()) {
    try {
      r.backend = DistBackend::nccl;
      resolve_launch(r, fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
      FAIL() << "NCCL accepted in a build without it";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::unsupported);
      EXPECT_NE(std::string(e.what()).find("backend nccl (world size 2 from RANK/WORLD_SIZE)"), std::string::npos)
          << e.what();
    }
    return;
  }
  EXPECT_EQ(resolve_launch(r, fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}})).backend, DistBackend::nccl);
}

TEST(Launch, GpuRanksCannotUseMpi) {
  DistRequest r;
  r.gpu = true;
  r.backend = DistBackend::mpi;
  try {
    resolve_launch(r, fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    FAIL() << "MPI accepted for device memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::unsupported);
    EXPECT_NE(std::string(e.what()).find("backend mpi reduces host memory"), std::string::npos) << e.what();
  }
}

TEST(Launch, BadValuesNameTheVariable) {
  try {
    resolve_launch(DistRequest{}, fake({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "4"}}));
    FAIL() << "accepted SLURM_PROCID=x1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::config);
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID=\"x1\""), std::string::npos) << e.what();
  }
  try {
    resolve_launch(DistRequest{}, fake({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
    FAIL() << "accepted rank 4 of 4";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::config);
    EXPECT_NE(std::string(e.what()).find("rank 4 is outside world size 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
