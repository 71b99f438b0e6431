// gpu_probe's op steps (probe_steps.h) on the emulated device: each step's line is "ok" (the fused
// attention is not emulated, so its steps run only on a GPU).
#include <gtest/gtest.h>

#include <cstdio>

#include "probe_steps.h"

namespace bert {
namespace {

TEST(ProbeSteps, EveryStepReportsOk) {
  const std::vector<probe::Line> lines = probe::op_steps(false);
  ASSERT_EQ(lines.size(), 6u);  // a kernel, four GEMMs, a graph
  for (const probe::Line& line : lines) {
    std::printf("step %s: %s %s (%.0f ms)\n", line.step.c_str(), line.ok ? "ok," : "FAILED:", line.detail.c_str(), line.ms);
    EXPECT_TRUE(line.ok) << line.step << ": " << line.detail;
  }
}

}  // namespace
}  // namespace bert
