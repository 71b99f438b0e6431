// The low-precision weight mirror of bf16/fp16 CudaOps: after set_weights, GEMMs whose weight
// lies in the registered range read the mirror (cast once, not per call), its bytes count in
// peak_bytes, and after an optimizer update plus weights_changed() the next GEMM sees the new
// weights. Without a registered range (or in fp32) nothing is mirrored and results agree.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"
#include "gpu_random.h"

namespace bert {
namespace {

constexpr int64_t M = 33;
constexpr int K = 64, N = 40;
constexpr int64_t kWeightAt = 1 << 20;  // W's offset inside the parameter buffer
constexpr int64_t kParams = kWeightAt + N * K + 500;
// The peak before set_weights may include short-lived buffers released since (the GELU probe's
// few KiB at construction), so the mirror raises the peak by at least its size less this.
constexpr size_t kTransientSlack = 64 << 10;

using testing::randn;

// out [M, N] = in · W^T for W at kWeightAt of params, on `ops`.
std::vector<float> gemm(Ops& ops, const float* params, const float* in, float* out) {
  ops.linear_fwd({out, nullptr, in, params + kWeightAt, nullptr, M, K, N, Activation::none});
  std::vector<float> host(M * N);
  ops.download(host.data(), out, host.size() * sizeof(float));
  return host;
}

struct Buffers {
  explicit Buffers(Ops& ops) : ops(ops) {
    const std::vector<float> p = randn(kParams, 1, 0.2f), x = randn(M * K, 2, 1.0f);
    params = static_cast<float*>(ops.alloc(kParams * sizeof(float)));
    update = static_cast<float*>(ops.alloc(kParams * sizeof(float)));
    in = static_cast<float*>(ops.alloc(x.size() * sizeof(float)));
    out = static_cast<float*>(ops.alloc(M * N * sizeof(float)));
    ops.upload(params, p.data(), p.size() * sizeof(float));
    ops.upload(update, p.data(), p.size() * sizeof(float));  // update = params
    ops.upload(in, x.data(), x.size() * sizeof(float));
  }
  ~Buffers() {
    for (float* b : {params, update, in, out}) ops.release(b);
  }
  Ops& ops;
  float *params, *update, *in, *out;
};

void negate(std::vector<float>& v) {
  for (auto& x : v) x = -x;
}

TEST(CudaWeightMirror, GemmsReadTheMirrorAndSeeUpdatesAfterWeightsChanged) {
  for (Precision precision : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(precision_name(precision));
    auto ops = make_cuda_ops(0, CudaOptions{precision});
    auto& cuda = dynamic_cast<CudaOps&>(*ops);
    Buffers buf(*ops);
    const std::vector<float> unmirrored = gemm(*ops, buf.params, buf.in, buf.out);
    ASSERT_NE(cuda.weight_mirror(), nullptr);
    EXPECT_EQ(cuda.weight_mirror()->refreshes(), 0) << "nothing registered yet";

    const size_t peak = ops->peak_bytes();
    ops->set_weights(buf.params, kParams);
    EXPECT_GE(ops->peak_bytes() + kTransientSlack, peak + kParams * 2)
        << "the mirror's bytes are accounted";
    const std::vector<float> first = gemm(*ops, buf.params, buf.in, buf.out);
    EXPECT_EQ(cuda.weight_mirror()->refreshes(), 1);
    for (size_t i = 0; i < first.size(); ++i)
      ASSERT_NEAR(first[i], unmirrored[i], 1e-4 + 1e-4 * std::fabs(unmirrored[i])) << i;
    gemm(*ops, buf.params, buf.in, buf.out);
    EXPECT_EQ(cuda.weight_mirror()->refreshes(), 1) << "no re-cast without weights_changed";

    // params -= 2 · params gives exactly -params; the GEMM result negates exactly too.
    ops->apply_update({buf.params, buf.update, {{0, kParams, 0.0f}}, {2.0f}});
    EXPECT_EQ(gemm(*ops, buf.params, buf.in, buf.out), first)
        << "until weights_changed the GEMM reads the old mirror (proof it is not re-cast)";
    ops->weights_changed();
    std::vector<float> want = first;
    negate(want);
    EXPECT_EQ(gemm(*ops, buf.params, buf.in, buf.out), want);
    EXPECT_EQ(cuda.weight_mirror()->refreshes(), 2);

    // A weight outside the registered range is cast per call, as before.
    std::vector<float> w(N * K);
    ops->download(w.data(), buf.params + kWeightAt, w.size() * sizeof(float));
    auto* outside = static_cast<float*>(ops->alloc(kParams * sizeof(float)));
    ops->upload(outside + kWeightAt, w.data(), w.size() * sizeof(float));
    const std::vector<float> copy = gemm(*ops, outside, buf.in, buf.out);
    for (size_t i = 0; i < copy.size(); ++i)
      ASSERT_NEAR(copy[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
    EXPECT_EQ(cuda.weight_mirror()->refreshes(), 2);
    ops->release(outside);
  }
}

TEST(CudaWeightMirror, Fp32KeepsNoMirror) {
  auto ops = make_cuda_ops(0, CudaOptions{Precision::fp32});
  Buffers buf(*ops);
  const size_t peak = ops->peak_bytes();
  ops->set_weights(buf.params, kParams);
  ops->weights_changed();
  EXPECT_EQ(dynamic_cast<CudaOps&>(*ops).weight_mirror(), nullptr);
  EXPECT_EQ(ops->peak_bytes(), peak);
  gemm(*ops, buf.params, buf.in, buf.out);
}

}  // namespace
}  // namespace bert
