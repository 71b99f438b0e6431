// main() of the GPU test programs: exits 77 (meson's skip code) when no CUDA device is present,
// otherwise runs the GoogleTest cases, stopping at the first test that leaves a sticky CUDA error
// (sticky_error.h). Output is line-buffered, and a crash, or the SIGABRT with which
// tests/gpu/run_bundle.sh stops a program at its time limit, prints the test that was running and
// a backtrace (addresses in the stripped bundle programs are offsets into the program, which
// `addr2line -C -f -e BUILD/tests/gpu/PROGRAM OFFSET` names in the build's unstripped copy).
#include <cuda_runtime_api.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "sticky_error.h"

namespace {

void print_backtrace(int sig) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  dprintf(STDERR_FILENO, "\n*** signal %d (%s) in test %s.%s; backtrace:\n", sig, strsignal(sig),
          test != nullptr ? test->test_suite_name() : "(none)", test != nullptr ? test->name() : "");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  raise(sig);  // the handler was reset (SA_RESETHAND): the default action ends the process
}

void backtrace_on_crash() {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction action = {};
  action.sa_handler = print_backtrace;
  action.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipping GPU tests\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  backtrace_on_crash();
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new bert::testing::StickyErrorListener);
  return RUN_ALL_TESTS();
}
