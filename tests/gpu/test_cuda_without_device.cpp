// The CUDA backend's behaviour where no GPU can be used (this runs on CPU-only CI machines):
// cuda_available() is false and asking for a device fails with a clear backend error rather
// than a crash. Precision names are checked on every machine.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "core/error.h"
#include "../expect_error.h"

namespace bert {
namespace {

using testing::expect_error;

bool device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(CudaWithoutDevice, FactoryReportsABackendError) {
  if (device_present()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(cuda_available());
  expect_error([] { make_cuda_ops(0, CudaOptions{Precision::bf16, true}); }, Code::backend, {"no CUDA device available"});
}

TEST(CudaPrecision, NamesAreParsedAndUnknownOnesRejected) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("tf32"), Precision::tf32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_EQ(parse_precision("fp16"), Precision::fp16);
  EXPECT_STREQ(precision_name(Precision::fp16), "fp16");
  try {
    parse_precision("fp16x");
    FAIL() << "fp16x must be rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_EQ(std::string(e.what()),
              "precision 'fp16x' is not one of \"fp32\", \"tf32\", \"bf16\", \"fp16\"");
  }
}

}  // namespace
}  // namespace bert
