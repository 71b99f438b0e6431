// The main of the distributed GoogleTest programs whose host owns MPI: initialises it (the
// library then uses it and leaves finalising to the host), runs the tests, and fails every rank
// when any rank failed.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

inline int run_tests_with_host_mpi(int argc, char** argv, int& rank, int& world) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
