// WireSpace, the slices and growth of NCCL's 16-bit gradient wire buffer: the first step grows
// it as its buckets come, the host's wait after that step grows it to the whole step, and the
// steps recorded as CUDA graphs after it fit without growing. A growth while a graph records or
// holds the buffer is refused.
#include <gtest/gtest.h>

#include <vector>

#include "../expect_error.h"
#include "dist/wire_space.h"

namespace bert {
namespace {

using testing::expect_error;

constexpr size_t kBucket = 256;  // bytes of each of the five equal buckets below

std::vector<WireSpace::Slice> step(WireSpace& wire, int buckets, bool capturing) {
  std::vector<WireSpace::Slice> slices;
  for (int i = 0; i < buckets; ++i) slices.push_back(wire.take(kBucket, capturing));
  wire.end_step();
  return slices;
}

TEST(WireSpace, TheWaitAfterTheFirstStepGrowsTheBufferSoRecordedStepsFit) {
  WireSpace wire;
  // Step 1, run directly: each growth takes everything the step has needed so far (1, 2, 4
  // buckets); the fifth bucket fits beside the fourth, so the buffer ends short of the step.
  const std::vector<WireSpace::Slice> first = step(wire, 5, false);
  const size_t grown[] = {kBucket, 2 * kBucket, 0, 4 * kBucket, 0};
  const size_t offsets[] = {0, 0, kBucket, 0, kBucket};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(first[i].grow_to, grown[i]) << "bucket " << i;
    EXPECT_EQ(first[i].offset, offsets[i]) << "bucket " << i;
  }
  EXPECT_EQ(wire.capacity(), 4 * kBucket);
  EXPECT_EQ(wire.settled(), 5 * kBucket);  // the host waited: grow to the whole step now
  EXPECT_EQ(wire.settled(), 0u);
  for (int recorded = 0; recorded < 2; ++recorded) {  // step 2 records, step 3 runs directly
    const std::vector<WireSpace::Slice> slices = step(wire, 5, recorded == 0);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(slices[i].grow_to, 0u);
      EXPECT_EQ(slices[i].offset, i * kBucket) << "consecutive slices, all in flight together";
    }
    EXPECT_EQ(wire.settled(), 0u);
  }
}

TEST(WireSpace, AGrowthWhileAGraphRecordsOrHoldsTheBufferIsRefused) {
  WireSpace unsettled;
  step(unsettled, 5, false);  // the host never waited after the first step
  expect_error([&] { step(unsettled, 5, true); }, Code::internal,
               {"NCCL's 16-bit gradient wire buffer (1024 bytes) would grow to 1280 while a CUDA graph records"});

  WireSpace held;
  step(held, 2, false);
  EXPECT_EQ(held.settled(), 0u);
  step(held, 2, true);  // a graph now holds the buffer
  expect_error([&] { step(held, 3, false); }, Code::internal,
               {"would grow to 768 while a CUDA graph holds the buckets"});

  WireSpace short_held;  // a graph took the buffer before the host's wait grew it
  step(short_held, 5, false);
  step(short_held, 4, true);
  expect_error([&] { short_held.settled(); }, Code::internal,
               {"(1024 bytes) would grow to 1280 while a CUDA graph holds the buckets"});
}

}  // namespace
}  // namespace bert
