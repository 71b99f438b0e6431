// The GPU test programs' guard against a sticky CUDA error (an illegal address or a trap in a
// kernel): it leaves the CUDA context unusable, so every later test of the program would fail
// with the same text and hide which test caused it. After each test the listener checks the
// device and, if it has such an error, names the test that left it and aborts the program
// (run_bundle.sh records the abort and goes on with the next program).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bert::testing {

// The device's sticky error, if any: synchronising fails, and fails again once the last error was
// read (an ordinary error is reported once and cleared).
inline cudaError_t sticky_cuda_error() {
  if (cudaDeviceSynchronize() == cudaSuccess) return cudaSuccess;
  (void)cudaGetLastError();
  return cudaDeviceSynchronize();
}

// Aborts the program, naming `test`, if the device has a sticky error.
inline void stop_on_sticky_error(const std::string& test) {
  const cudaError_t error = sticky_cuda_error();
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "sticky CUDA error after %s: %s; the CUDA context is unusable, stopping this program\n",
               test.c_str(), cudaGetErrorString(error));
  std::fflush(stderr);
  std::abort();
}

class StickyErrorListener final : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& test) override {
    stop_on_sticky_error(std::string(test.test_suite_name()) + "." + test.name());
  }
};

}  // namespace bert::testing
