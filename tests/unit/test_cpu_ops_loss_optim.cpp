// CPU softmax cross-entropy (against a double loop, padding columns and label -1 ignored,
// gradient by finite differences, in-place gradient, bad label) and the optimizer primitives
// (segment sums of squares, Adam direction, scaled update, scale), including thread-count
// invariance of the sums of squares.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::expect_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::random_ints;

constexpr int64_t M = 6;
constexpr int V = 11, LD = 16;

struct XentCase {
  std::vector<float> logits = random_floats(M * LD, 1, -4.0f, 4.0f);
  std::vector<int32_t> labels = {3, -1, 0, 10, 7, 3};
  XentCase() {
    for (int64_t i = 0; i < M; ++i) {
      for (int j = V; j < LD; ++j) logits[i * LD + j] = 50.0f;  // padding would dominate if used
    }
    logits[2 * LD + 0] = 9.0f;  // row 2 predicts its label
  }
};

TEST(CpuSoftmaxXent, MatchesDoubleLoopAndIgnoresPaddingAndLabelMinusOne) {
  auto ops = make_cpu_ops(2);
  XentCase c;
  const float grad_scale = 0.25f;
  std::vector<float> dlogits(M * LD, 77.0f), losses(M, -1.0f);
  std::vector<int32_t> correct(M, -1);
  ops->softmax_xent({dlogits.data(), losses.data(), correct.data(), c.logits.data(),
                     c.labels.data(), M, V, LD, grad_scale});
  std::vector<double> e_loss(M, 0.0), e_grad(M * LD, 0.0);
  std::vector<int32_t> e_correct(M, 0);
  for (int64_t i = 0; i < M; ++i) {
    if (c.labels[i] < 0) continue;
    const float* x = &c.logits[i * LD];
    double mx = x[0];
    int arg = 0;
    for (int j = 1; j < V; ++j) {
      if (x[j] > mx) {
        mx = x[j];
        arg = j;
      }
    }
    double sum = 0.0;
    for (int j = 0; j < V; ++j) sum += std::exp(x[j] - mx);
    e_loss[i] = mx + std::log(sum) - x[c.labels[i]];
    e_correct[i] = arg == c.labels[i];
    for (int j = 0; j < V; ++j) {
      e_grad[i * LD + j] = (std::exp(x[j] - mx) / sum - (j == c.labels[i])) * grad_scale;
    }
  }
  expect_close(losses, e_loss, 1e-6, 1e-6, "losses");
  expect_close(dlogits, e_grad, 1e-7, 1e-5, "dlogits");
  EXPECT_EQ(correct, e_correct);
  EXPECT_EQ(correct[2], 1);
  EXPECT_EQ(losses[1], 0.0f);
}

TEST(CpuSoftmaxXent, GradientMatchesFiniteDifferences) {
  auto ops = make_cpu_ops(2);
  XentCase c;
  std::vector<float> dlogits(M * LD), losses(M);
  const float grad_scale = 1.5f;
  auto f = [&]() {
    ops->softmax_xent({dlogits.data(), losses.data(), nullptr, c.logits.data(), c.labels.data(), M,
                       V, LD, grad_scale});
    double total = 0.0;
    for (float l : losses) total += l;
    return total * grad_scale;
  };
  f();
  const std::vector<float> analytic = dlogits;
  const std::vector<double> numeric = numeric_grad(c.logits, f, 1e-2f);
  expect_close(analytic, numeric, 1e-3, 1e-3, "dlogits vs finite differences");
}

TEST(CpuSoftmaxXent, GradientMayOverwriteLogits) {
  auto ops = make_cpu_ops(2);
  XentCase c;
  std::vector<float> separate(M * LD), losses_a(M), losses_b(M);
  std::vector<int32_t> correct_a(M), correct_b(M);
  ops->softmax_xent({separate.data(), losses_a.data(), correct_a.data(), c.logits.data(),
                     c.labels.data(), M, V, LD, 1.0f});
  std::vector<float> inplace = c.logits;
  ops->softmax_xent({inplace.data(), losses_b.data(), correct_b.data(), inplace.data(),
                     c.labels.data(), M, V, LD, 1.0f});
  EXPECT_EQ(inplace, separate);
  EXPECT_EQ(losses_a, losses_b);
  EXPECT_EQ(correct_a, correct_b);
}

TEST(CpuSoftmaxXent, LabelOutsideVocabularyThrows) {
  auto ops = make_cpu_ops(1);
  XentCase c;
  c.labels[4] = V;
  std::vector<float> dlogits(M * LD), losses(M);
  try {
    ops->softmax_xent({dlogits.data(), losses.data(), nullptr, c.logits.data(), c.labels.data(), M,
                       V, LD, 1.0f});
    FAIL() << "label V accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("label 11 of row 4"), std::string::npos) << e.what();
  }
}

std::vector<ParamSegment> test_segments() {
  // Gaps between segments must stay untouched; one segment spans several sumsq chunks.
  return {{0, 5, 0.01f}, {8, 20000, 0.0f}, {20010, 0, 0.5f}, {20012, 37, 0.01f}};
}
constexpr int64_t kBufferSize = 20060;

TEST(CpuOptimizer, SegmentSumsqMatchesLoopForAnyThreadCount) {
  const std::vector<float> x = random_floats(kBufferSize, 30, -2.0f, 2.0f);
  const auto segs = test_segments();
  std::vector<double> expected(segs.size(), 0.0);
  for (size_t s = 0; s < segs.size(); ++s) {
    for (int64_t i = 0; i < segs[s].size; ++i) {
      expected[s] += double(x[segs[s].offset + i]) * x[segs[s].offset + i];
    }
  }
  std::vector<double> first;
  for (int threads : {1, 2, 3}) {
    auto ops = make_cpu_ops(threads);
    std::vector<double> out(segs.size(), -1.0);
    ops->segment_sumsq({out.data(), x.data(), segs});
    expect_close(out, expected, 0.0, 1e-13, "segment_sumsq");
    EXPECT_EQ(out[2], 0.0);
    if (first.empty()) first = out;
    EXPECT_EQ(out, first) << threads << " threads";
  }
}

TEST(CpuOptimizer, AdamDirectionAndApplyUpdateFollowTheFormula) {
  auto ops = make_cpu_ops(2);
  const auto segs = test_segments();
  const std::vector<float> grad = random_floats(kBufferSize, 31);
  const std::vector<float> param = random_floats(kBufferSize, 32);
  std::vector<float> m = random_floats(kBufferSize, 33, -0.1f, 0.1f);
  std::vector<float> v = random_floats(kBufferSize, 34, 0.0f, 0.01f);
  std::vector<float> update(kBufferSize, 0.0f);
  AdamStepArgs args;
  args.beta1 = 0.9f;
  args.beta2 = 0.999f;
  args.eps = 1e-6f;
  args.bias_correction1 = 1.0f - std::pow(0.9f, 3.0f);
  args.bias_correction2 = 1.0f - std::pow(0.999f, 3.0f);
  args.grad_scale = 0.5f;
  std::vector<float> e_m = m, e_v = v, e_update = update;
  for (const ParamSegment& s : segs) {
    for (int64_t i = s.offset; i < s.offset + s.size; ++i) {
      const double g = double(grad[i]) * args.grad_scale;
      const double mi = args.beta1 * double(m[i]) + (1.0 - args.beta1) * g;
      const double vi = args.beta2 * double(v[i]) + (1.0 - args.beta2) * g * g;
      e_m[i] = static_cast<float>(mi);
      e_v[i] = static_cast<float>(vi);
      e_update[i] = static_cast<float>((mi / args.bias_correction1) /
                                           (std::sqrt(vi / args.bias_correction2) + args.eps) +
                                       s.weight_decay * double(param[i]));
    }
  }
  ops->adam_direction({update.data(), m.data(), v.data(), grad.data(), param.data(), segs, args});
  expect_close(m, e_m, 1e-8, 1e-5, "m");
  expect_close(v, e_v, 1e-10, 1e-5, "v");
  expect_close(update, e_update, 1e-6, 1e-4, "update");
  for (int64_t gap : {5, 6, 7, 20008, 20009, 20010, 20011, 20049, 20059}) {
    EXPECT_EQ(update[gap], 0.0f) << "gap element " << gap;
    EXPECT_EQ(m[gap], random_floats(kBufferSize, 33, -0.1f, 0.1f)[gap]) << "gap element " << gap;
  }

  // LAMB's sums of squares from the same pass: bitwise what segment_sumsq gives.
  std::vector<float> m2 = random_floats(kBufferSize, 33, -0.1f, 0.1f), v2 = random_floats(kBufferSize, 34, 0.0f, 0.01f);
  std::vector<float> update2(kBufferSize, 0.0f);
  std::vector<double> fused(2 * segs.size()), p_sq(segs.size()), u_sq(segs.size());
  ops->adam_direction({update2.data(), m2.data(), v2.data(), grad.data(), param.data(), segs, args, fused.data()});
  EXPECT_EQ(update2, update);
  EXPECT_EQ(m2, m);
  ops->segment_sumsq({p_sq.data(), param.data(), segs});
  ops->segment_sumsq({u_sq.data(), update.data(), segs});
  for (size_t s = 0; s < segs.size(); ++s) {
    EXPECT_EQ(fused[s], p_sq[s]) << "param, segment " << s;
    EXPECT_EQ(fused[segs.size() + s], u_sq[s]) << "update, segment " << s;
  }

  const std::vector<float> scales = {0.1f, -2.0f, 5.0f, 0.5f};
  std::vector<float> p = param;
  ops->apply_update({p.data(), update.data(), segs, scales});
  std::vector<float> e_p = param;
  for (size_t s = 0; s < segs.size(); ++s) {
    for (int64_t i = segs[s].offset; i < segs[s].offset + segs[s].size; ++i) {
      e_p[i] = param[i] - scales[s] * update[i];
    }
  }
  EXPECT_EQ(p, e_p);
  EXPECT_THROW(ops->apply_update({p.data(), update.data(), segs, {1.0f}}), Error);
}

TEST(CpuOptimizer, ScaleMultipliesEveryElement) {
  auto ops = make_cpu_ops(2);
  const std::vector<float> x0 = random_floats(40001, 35);
  std::vector<float> x = x0;
  ops->scale(x.data(), -0.375f, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], x0[i] * -0.375f) << "element " << i;
}

TEST(CpuOptimizer, NegativeSegmentSizeIsRejected) {
  auto ops = make_cpu_ops(1);
  std::vector<double> out(1);
  std::vector<float> x(4);
  try {
    ops->segment_sumsq({out.data(), x.data(), {{0, -3, 0.0f}}});
    FAIL() << "negative size accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size -3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
