// main() of the GPU test programs: exits 77 (meson's skip code) when no CUDA device is present,
// otherwise runs the GoogleTest cases, stopping at the first test that leaves a sticky CUDA error
// (sticky_error.h).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "sticky_error.h"

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipping GPU tests\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new bert::testing::StickyErrorListener);
  return RUN_ALL_TESTS();
}
