// The kernel emulation's own checks, each shown catching a deliberately broken kernel: barriers
// that cannot complete, shuffles from exited lanes, shared memory a block did not write (NaN, and
// reported by the race check), shared-memory races within a block, device-memory races between
// the blocks of a launch, and results that depend on the order of blocks or threads (changed by
// the seeded random schedule), and the emulated cuBLASLt refusing a misaligned pointer. Built twice: with the access hooks (emulation_checks: the race
// checks), and under AddressSanitizer + UBSan (emulation_checks_sanitized: a kernel reading past
// its allocation, a misaligned vector load).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "cuda_emu.h"
#include "racecheck.h"

namespace {

// The error a launch fails with ("" if it does not).
std::string launch_error(const char* name, dim3 grid, dim3 block, const std::function<void()>& kernel) {
  try {
    cuda_emu::run_grid(name, grid, block, kernel);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// Device memory of n floats, filled with `value`, read back with values().
struct DeviceFloats {
  float* data = nullptr;
  size_t n;
  DeviceFloats(size_t count, float value) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)), cudaSuccess);
    for (size_t i = 0; i < n; ++i) data[i] = value;  // emulated device memory is host memory
  }
  ~DeviceFloats() { cudaFree(data); }
  std::vector<float> values() const { return std::vector<float>(data, data + n); }
};

// Race checks off for one test (to see what a broken kernel computes), on again after it.
struct RacecheckOff {
  RacecheckOff() { cuda_emu::racecheck_enabled() = false; }
  ~RacecheckOff() { cuda_emu::racecheck_enabled() = true; }
};
// A random schedule for one test.
struct RandomSchedule {
  explicit RandomSchedule(uint64_t seed) { cuda_emu::set_schedule_seed(seed); }
  ~RandomSchedule() { cuda_emu::set_schedule_seed(std::nullopt); }
};

#if defined(__SANITIZE_ADDRESS__)
// Emulated device memory is host heap: a kernel reading one element past its allocation is stopped
// by AddressSanitizer, a float4 load from an address that is not 16-byte aligned by UBSan.
TEST(CudaEmulationSanitized, AReadPastTheAllocationIsStopped) {
  DeviceFloats in(64, 1.0f), out(64, 0.0f);
  const float* i = in.data;
  float* o = out.data;
  EXPECT_DEATH(cuda_emu::run_grid("reads_one_past_the_end", dim3(1), dim3(64), [i, o] { o[threadIdx.x] = i[threadIdx.x + 1]; }),
               "heap-buffer-overflow");
}

TEST(CudaEmulationSanitized, AMisalignedVectorLoadIsStopped) {
  DeviceFloats in(64, 1.0f), out(64, 0.0f);
  const float* i = in.data;
  float* o = out.data;
  EXPECT_DEATH(cuda_emu::run_grid("misaligned_float4", dim3(1), dim3(1), [i, o] {
                 const float4 v = reinterpret_cast<const float4*>(i + 1)[0];
                 o[0] = v.x;
               }),
               "misaligned address");
}
#endif

TEST(CudaEmulation, ReportsAShuffleFromAnExitedLane) {
  const std::string error = launch_error("shuffle_from_exited_lane", dim3(1), dim3(32), [] {
    if (threadIdx.x >= 16) return;
    (void)__shfl_xor_sync(0xffffffffu, 1.0f, 16);
  });
  EXPECT_CONTAINS(error, "kernel shuffle_from_exited_lane, block (0,0,0)");
  EXPECT_CONTAINS(error, "has exited");
}

TEST(CudaEmulation, ReportsDivergentBarriers) {
  const std::string error = launch_error("divergent_barriers", dim3(1), dim3(64), [] {
    if (threadIdx.x < 8) {
      (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
    } else {
      __syncthreads();
    }
  });
  EXPECT_CONTAINS(error, "deadlock");
}

// Each block reads its shared array before writing it: every block reads the poison (NaN), never the
// values the block before it left; the race check names the read.
void reads_before_writing(float* o) {
  static char site;
  auto& s = cuda_emu::block_shared<float[32]>(&site);
  o[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
  s[threadIdx.x] = 7.0f;
}

TEST(CudaEmulation, SharedMemoryABlockDidNotWriteIsNan) {
  RacecheckOff off;
  DeviceFloats out(4 * 32, 0.0f);
  float* o = out.data;
  EXPECT_EQ(launch_error("reads_before_writing", dim3(4), dim3(32), [o] { reads_before_writing(o); }), "");
  for (float v : out.values()) ASSERT_TRUE(std::isnan(v)) << v;
}

TEST(CudaEmulation, ReportsSharedArraysOverTheBlockLimit) {
  const std::string error = launch_error("too_much_shared", dim3(1), dim3(32), [] {
    static char a, b;
    cuda_emu::block_shared<double[4096]>(&a)[threadIdx.x] = 0;  // 32 KiB
    cuda_emu::block_shared<double[4096]>(&b)[threadIdx.x] = 0;  // 64 KiB in all
  });
  EXPECT_CONTAINS(error, "the block's shared arrays take 65536 bytes, more than the 49152 bytes");
}

#if !defined(__SANITIZE_ADDRESS__)  // the race checks need the access hooks, which ASan's build lacks
TEST(CudaEmulation, RacecheckReportsAnUninitialisedSharedRead) {
  DeviceFloats out(4 * 32, 0.0f);
  float* o = out.data;
  const std::string error = launch_error("reads_before_writing", dim3(4), dim3(32), [o] { reads_before_writing(o); });
  EXPECT_CONTAINS(error, "kernel reads_before_writing, block (0,0,0): uninitialised shared memory: "
                         "thread (0,0,0) reads byte 0 of shared memory, which no thread of its block has written");
}

// A neighbour's shared value read without __syncthreads (read after write): reported; with the
// barrier, not.
TEST(CudaEmulation, RacecheckReportsAMissingSyncthreads) {
  DeviceFloats out(64, 0.0f);
  float* o = out.data;
  auto neighbour = [o](bool barrier) {
    return [o, barrier] {
      static char site;
      auto& s = cuda_emu::block_shared<float[64]>(&site);
      s[threadIdx.x] = -1.0f;
      __syncthreads();
      s[threadIdx.x] = static_cast<float>(threadIdx.x);
      if (barrier) __syncthreads();
      o[threadIdx.x] = s[(threadIdx.x + 63) % 64];
    };
  };
  const std::string error = launch_error("neighbour_without_barrier", dim3(1), dim3(64), neighbour(false));
  EXPECT_CONTAINS(error, "shared-memory race: thread (1,0,0) reads byte 0 of shared memory, which thread "
                         "(0,0,0) wrote, with no __syncthreads between them");
  EXPECT_EQ(launch_error("neighbour_with_barrier", dim3(1), dim3(64), neighbour(true)), "");
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out.values()[t], static_cast<float>((t + 63) % 64));
}

// A write to bytes another thread read in the same barrier interval (write after read).
TEST(CudaEmulation, RacecheckReportsAWriteAfterAnotherThreadsRead) {
  const std::string error = launch_error("overwrite_while_read", dim3(1), dim3(32), [] {
    static char site;
    auto& s = cuda_emu::block_shared<float[32]>(&site);
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    const float right = s[(threadIdx.x + 1) % 32];
    s[threadIdx.x] = right + 1.0f;  // thread 0 read s[1] before thread 1 overwrites it
  });
  EXPECT_CONTAINS(error, "shared-memory race: thread (1,0,0) writes byte 4 of shared memory, which thread "
                         "(0,0,0) accessed, with no __syncthreads between them");
}

// Lanes of one warp exchanging through shared memory around a shuffle are ordered by it.
TEST(CudaEmulation, RacecheckAcceptsLanesOrderedByAShuffle) {
  EXPECT_EQ(launch_error("warp_exchange", dim3(1), dim3(32), [] {
    static char site;
    auto& s = cuda_emu::block_shared<float[32]>(&site);
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    (void)__shfl_xor_sync(0xffffffffu, 0.0f, 1);
    (void)s[threadIdx.x ^ 1];
  }), "");
}

// Device memory: every block writing one output, or a block reading what another wrote in the same
// launch, is reported; blocks with outputs of their own are not.
TEST(CudaEmulation, RacecheckReportsBlocksSharingDeviceMemory) {
  DeviceFloats out(8, 0.0f);
  float* o = out.data;
  std::string error = launch_error("all_blocks_write_one_output", dim3(8), dim3(32), [o] {
    if (threadIdx.x == 0) o[0] = static_cast<float>(blockIdx.x);
  });
  EXPECT_CONTAINS(error, "kernel all_blocks_write_one_output, block (1,0,0): device-memory race: block 1 writes "
                         "byte 0 of an allocation of 32 bytes, which block 0 wrote in the same launch");
  error = launch_error("reads_the_previous_block", dim3(8), dim3(32), [o] {
    if (threadIdx.x == 0 && blockIdx.x > 0) o[blockIdx.x] = o[blockIdx.x - 1] + 1.0f;
  });
  EXPECT_CONTAINS(error, "block 2 reads byte 4 of an allocation of 32 bytes, which block 1 wrote in the same launch");
  EXPECT_EQ(launch_error("own_outputs", dim3(8), dim3(32), [o] {
    if (threadIdx.x == 0) o[blockIdx.x] = static_cast<float>(blockIdx.x);
  }), "");
}

#endif

// The emulated cuBLASLt's contract: an algorithm its heuristic chose for pointers aligned to 16 bytes
// refuses (NOT_SUPPORTED) an A 4 bytes off that, and runs on aligned ones.
TEST(EmulatedCublasLt, AnAlgorithmRefusesPointersLessAlignedThanItsPreferenceDeclared) {
  constexpr int n = 8;
  DeviceFloats a(n * n + 1, 1.0f), b(n * n, 1.0f), c(n * n, 0.0f);
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout;
  cublasLtMatmulPreference_t pref;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, n), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const uint32_t sixteen = 16;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &sixteen, sizeof sixteen), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, pref, 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float one = 1.0f, zero = 0.0f;
  auto run = [&](const float* A) {
    return cublasLtMatmul(handle, desc, &one, A, layout, b.data, layout, &zero, c.data, layout, c.data, layout,
                          &result.algo, nullptr, 0, nullptr);
  };
  EXPECT_EQ(run(a.data + 1), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run(a.data), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(c.values()[0], static_cast<float>(n));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

// A result that depends on the order of blocks (each block adds one to the previous block's output)
// or of threads between barriers (each reads a neighbour's shared value without __syncthreads)
// comes out right in the emulator's plain order, and changes under the random schedule.
TEST(CudaEmulation, RandomScheduleChangesOrderDependentResults) {
  RacecheckOff off;
  DeviceFloats chain(64, 0.0f), neighbours(256, 0.0f);
  float* c = chain.data;
  float* n = neighbours.data;
  auto chain_kernel = [c] {
    if (threadIdx.x == 0 && blockIdx.x > 0) c[blockIdx.x] = c[blockIdx.x - 1] + 1.0f;
  };
  auto neighbour_kernel = [n] {
    static char site;
    auto& s = cuda_emu::block_shared<float[256]>(&site);
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    n[threadIdx.x] = threadIdx.x > 0 ? s[threadIdx.x - 1] : -1.0f;
  };
  auto run_both = [&] {
    for (size_t i = 0; i < chain.n; ++i) chain.data[i] = 0.0f;
    cuda_emu::run_grid("chain", dim3(64), dim3(32), chain_kernel);
    cuda_emu::run_grid("neighbours", dim3(1), dim3(256), neighbour_kernel);
  };
  run_both();
  for (int b = 0; b < 64; ++b) ASSERT_EQ(chain.values()[b], static_cast<float>(b));
  for (int t = 1; t < 256; ++t) ASSERT_EQ(neighbours.values()[t], static_cast<float>(t - 1));

  RandomSchedule schedule(12345);
  run_both();
  int chain_wrong = 0, neighbours_wrong = 0;
  for (int b = 0; b < 64; ++b) chain_wrong += chain.values()[b] != static_cast<float>(b);
  for (int t = 1; t < 256; ++t) neighbours_wrong += neighbours.values()[t] != static_cast<float>(t - 1);
  EXPECT_GT(chain_wrong, 0);
  EXPECT_GT(neighbours_wrong, 0);
}

}  // namespace
