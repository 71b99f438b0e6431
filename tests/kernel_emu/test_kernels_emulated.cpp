// Every kernel launcher of kernels/ run in the CPU emulation of CUDA (cuda_emu.h) against the CPU
// backend (make_cpu_ops) on the same random inputs (also in a random order of blocks and threads, and
// race-checked: tests/kernel_emu/meson.build), so the kernels' indexing, barriers, warp
// reductions and Philox masks are checked on machines without a GPU. Host vectors serve as
// "device" memory. Shapes are chosen to leave partial blocks, partial warps, vector tails and
// multi-chunk segments. Tolerances: exact where both sides do the same float operations in the
// same order (gathers, scatter-adds, embeddings, dropout, casts, scale, apply_update); 2e-6..1e-5
// where only the summation order differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "../unit/test_cpu_ops_common.h"
#include "backend/cpu/cpu_activation.h"
#include "core/half.h"
#include "core/philox.h"
#include "cuda_emu.h"
#include "kernels/activation.h"
#include "kernels/attention_padding.h"
#include "kernels/attention_softmax.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/fused_attention_inputs.h"
#include "kernels/layernorm.h"
#include "kernels/optimizer.h"
#include "kernels/reduce.h"
#include "kernels/rows.h"
#include "kernels/softmax_xent.h"

namespace bert {
namespace {

using testing::expect_close;
using testing::random_floats;
using testing::random_ints;
using kernels::LowPrecision;

class EmulatedKernels : public ::testing::Test {
 protected:
  std::unique_ptr<Ops> cpu = make_cpu_ops(1);
};

template <typename T>
void expect_equal(const std::vector<T>& actual, const std::vector<T>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << what << " differs at element " << i;
}

TEST_F(EmulatedKernels, ActivationsMatchTheCpuFormulas) {
  const int64_t n = 1000;  // not a multiple of the block
  const auto pre = random_floats(n, 1, -4.0f, 4.0f);
  const auto dout = random_floats(n, 2);
  for (Activation act : {Activation::gelu_erf, Activation::gelu_tanh, Activation::tanh}) {
    std::vector<float> out(n), expected(n), dpre(n), expected_dpre(n);
    kernels::activation_fwd(out.data(), pre.data(), n, act, nullptr);
    cpu->activation_fwd({expected.data(), pre.data(), n, act});
    expect_close(out, expected, 1e-6, 1e-6, "activation_fwd");
    kernels::activation_bwd(dpre.data(), dout.data(), pre.data(), n, act, nullptr);
    dispatch_activation(act, [&](auto tag) {
      for (int64_t i = 0; i < n; ++i)
        expected_dpre[i] = dout[i] * activation_grad<decltype(tag)::value>(pre[i]);
    });
    expect_close(dpre, expected_dpre, 1e-6, 1e-6, "activation_bwd");
  }
}

TEST_F(EmulatedKernels, DropoutMasksAreTheCpuMasks) {
  const int64_t n = 1027;  // a tail after the groups of four Philox outputs
  const auto in = random_floats(n, 3);
  const auto residual = random_floats(n, 4);
  for (float p : {0.0f, 0.1f, 0.5f}) {
    const DropoutSite site{1234, 7, 5, p};
    const float keep_scale = 1.0f / (1.0f - p);
    for (const float* res : {static_cast<const float*>(nullptr), residual.data()}) {
      std::vector<float> out(n), expected(n);
      kernels::dropout_residual_fwd(out.data(), in.data(), res, n, site, keep_scale, 0, nullptr);
      cpu->dropout_residual_fwd({expected.data(), in.data(), res, n, site});
      expect_equal(out, expected, "dropout_residual_fwd");
    }
    std::vector<float> din(n), expected(n);
    kernels::dropout_bwd(din.data(), in.data(), n, site, keep_scale, nullptr);
    cpu->dropout_bwd({expected.data(), in.data(), n, site});
    expect_equal(din, expected, "dropout_bwd");
  }
}

TEST_F(EmulatedKernels, EmbeddingsGathersAndScatterAddsAreExact) {
  const int64_t T = 45;
  const int H = 72, V = 17, P = 20;
  const auto word = random_floats(size_t(V) * H, 5), pos = random_floats(size_t(P) * H, 6),
             type = random_floats(2 * size_t(H), 7);
  const auto word_ids = random_ints(T, 8, 0, V - 1), pos_ids = random_ints(T, 9, 0, P - 1),
             type_ids = random_ints(T, 10, 0, 1);
  std::vector<float> out(T * H), expected(T * H);
  kernels::embedding_fwd(out.data(), word_ids.data(), pos_ids.data(), type_ids.data(), word.data(),
                         pos.data(), type.data(), T, H, nullptr);
  cpu->embedding_fwd({expected.data(), word_ids.data(), pos_ids.data(), type_ids.data(),
                      word.data(), pos.data(), type.data(), T, H});
  expect_equal(out, expected, "embedding_fwd");

  std::vector<float> gathered(T * H), expected_gathered(T * H);
  kernels::gather_rows(gathered.data(), word.data(), word_ids.data(), T, H, nullptr);
  cpu->gather_rows({expected_gathered.data(), word.data(), word_ids.data(), T, H});
  expect_equal(gathered, expected_gathered, "gather_rows");

  // Rows repeat (45 rows into 17), so the order of the additions decides the bits.
  const auto src = random_floats(T * H, 11);
  auto dst = random_floats(size_t(V) * H, 12), expected_dst = dst;
  std::vector<char> scratch(kernels::scatter_add_scratch_bytes(T));
  kernels::scatter_add_rows(dst.data(), src.data(), word_ids.data(), T, H, scratch.data(),
                            scratch.size(), nullptr);
  cpu->scatter_add_rows({expected_dst.data(), src.data(), word_ids.data(), T, H});
  expect_equal(dst, expected_dst, "scatter_add_rows");

  // Two long runs (the type ids: 45 rows into 2) over more columns than a block has threads.
  const int wide = 300;
  const auto wide_src = random_floats(T * wide, 13);
  auto wide_dst = random_floats(2 * size_t(wide), 14), expected_wide = wide_dst;
  kernels::scatter_add_rows(wide_dst.data(), wide_src.data(), type_ids.data(), T, wide, scratch.data(),
                            scratch.size(), nullptr);
  cpu->scatter_add_rows({expected_wide.data(), wide_src.data(), type_ids.data(), T, wide});
  expect_equal(wide_dst, expected_wide, "scatter_add_rows of long runs");
}

TEST_F(EmulatedKernels, LayerNormMatchesTheCpu) {
  const int64_t M = 37;
  for (int N : {40, 200, 768}) {  // 32, 128 and 256 threads per row
    const auto in = random_floats(M * N, 13, -3.0f, 3.0f);
    const auto gamma = random_floats(N, 14), beta = random_floats(N, 15);
    const auto dout = random_floats(M * N, 16);
    std::vector<float> out(M * N), mean(M), rstd(M);
    std::vector<float> e_out(M * N), e_mean(M), e_rstd(M);
    kernels::layernorm_fwd(out.data(), mean.data(), rstd.data(), in.data(), gamma.data(),
                           beta.data(), M, N, 1e-12f, nullptr);
    cpu->layernorm_fwd({e_out.data(), e_mean.data(), e_rstd.data(), in.data(), gamma.data(),
                        beta.data(), M, N, 1e-12f});
    expect_close(out, e_out, 1e-5, 1e-5, "layernorm_fwd out");
    expect_close(mean, e_mean, 1e-6, 1e-6, "layernorm_fwd mean");
    expect_close(rstd, e_rstd, 1e-6, 1e-6, "layernorm_fwd rstd");

    std::vector<float> din(M * N), e_din(M * N);
    auto dgamma = random_floats(N, 17), dbeta = random_floats(N, 18);  // accumulated into
    auto e_dgamma = dgamma, e_dbeta = dbeta;
    std::vector<double> partials(size_t(kernels::layernorm_param_chunks(M)) * 2 * N);
    kernels::layernorm_bwd_input(din.data(), dout.data(), in.data(), e_mean.data(),
                                 e_rstd.data(), gamma.data(), M, N, nullptr);
    kernels::layernorm_bwd_params(dgamma.data(), dbeta.data(), dout.data(), in.data(),
                                  e_mean.data(), e_rstd.data(), M, N, partials.data(), nullptr);
    cpu->layernorm_bwd({e_din.data(), e_dgamma.data(), e_dbeta.data(), dout.data(), in.data(),
                        e_mean.data(), e_rstd.data(), gamma.data(), M, N});
    expect_close(din, e_din, 1e-5, 1e-5, "layernorm_bwd din");
    expect_close(dgamma, e_dgamma, 1e-5, 1e-6, "layernorm_bwd dgamma");
    expect_close(dbeta, e_dbeta, 1e-5, 1e-6, "layernorm_bwd dbeta");
  }
}

TEST_F(EmulatedKernels, ColumnSumIsTheCpuBiasGradient) {
  const int64_t M = 150;  // three row chunks, the last partial
  const int K = 3, N = 70;
  const auto dout = random_floats(M * N, 19), in = random_floats(M * K, 20),
             W = random_floats(size_t(N) * K, 21);
  auto db = random_floats(N, 22), e_db = db;
  std::vector<double> partials(size_t(kernels::column_sum_chunks(M)) * N);
  kernels::column_sum_add(db.data(), dout.data(), M, N, partials.data(), nullptr);
  std::vector<float> dW(size_t(N) * K);
  cpu->linear_bwd({nullptr, dW.data(), e_db.data(), dout.data(), in.data(), W.data(), nullptr,
                   nullptr, M, K, N, Activation::none, false});
  expect_close(db, e_db, 2e-6, 1e-6, "column_sum_add");
}

// A SegmentTable over host memory ("device" memory here), built as CudaOps::upload_segments does.
struct HostSegments {
  std::vector<int64_t> words;
  std::vector<float> value;
  kernels::SegmentTable table(const std::vector<ParamSegment>& segs, std::vector<float> values) {
    const int64_t chunks = kernels::fill_segment_words(segs, words);
    value = std::move(values);
    return kernels::segment_table_at(words.data(), value.data(), static_cast<int>(segs.size()),
                                     chunks);
  }
};

TEST_F(EmulatedKernels, OptimizerKernelsMatchTheCpu) {
  // A multi-chunk segment, an empty one (sharing its chunk start) and small ones, with gaps.
  const std::vector<ParamSegment> segs = {
      {0, 40000, 0.01f}, {40000, 0, 0.0f}, {40010, 300, 0.0f}, {40400, 17, 0.01f}};
  const int64_t n = 40417;
  const auto grad = random_floats(n, 23), param = random_floats(n, 24);
  HostSegments host;

  std::vector<double> sums(segs.size()), e_sums(segs.size());
  const auto zeros = std::vector<float>(segs.size(), 0.0f);
  auto table = host.table(segs, zeros);
  std::vector<double> partials(std::max<int64_t>(table.chunks, 1));
  kernels::segment_sumsq(sums.data(), grad.data(), table, partials.data(), nullptr);
  cpu->segment_sumsq({e_sums.data(), grad.data(), segs});
  expect_close(sums, e_sums, 1e-9, 1e-12, "segment_sumsq");

  AdamStepArgs args;
  args.bias_correction1 = 0.19f;
  args.bias_correction2 = 0.0199f;
  args.grad_scale = 0.5f;
  auto m = random_floats(n, 25), v = random_floats(n, 26, 0.0f, 1.0f);
  auto e_m = m, e_v = v;
  std::vector<float> update(n), e_update(n), decay;
  for (const ParamSegment& s : segs) decay.push_back(s.weight_decay);
  table = host.table(segs, decay);
  kernels::adam_direction(update.data(), m.data(), v.data(), grad.data(), param.data(), table,
                          args, nullptr, nullptr);
  cpu->adam_direction({e_update.data(), e_m.data(), e_v.data(), grad.data(), param.data(), segs,
                       args});
  expect_close(m, e_m, 1e-7, 1e-6, "adam m");
  expect_close(v, e_v, 1e-7, 1e-6, "adam v");
  expect_close(update, e_update, 1e-6, 1e-5, "adam update");

  const std::vector<float> scales = {0.1f, 0.2f, 0.3f, 0.4f};
  auto p = param, e_p = param;
  table = host.table(segs, scales);
  kernels::apply_update(p.data(), e_update.data(), table, nullptr);
  cpu->apply_update({e_p.data(), e_update.data(), segs, scales});
  expect_equal(p, e_p, "apply_update");

  auto x = grad, e_x = grad;
  kernels::scale(x.data(), 0.37f, n, nullptr);
  cpu->scale(e_x.data(), 0.37f, n);
  expect_equal(x, e_x, "scale");
}

// Raw scores Q·K^T of every sequence and head, in the probs layout (double accumulation).
std::vector<float> attention_scores(const std::vector<float>& qkv, const AttentionLayout& layout,
                                    int heads, int D) {
  const int H = heads * D;
  std::vector<float> scores(layout.probs_elems(heads));
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int s0 = layout.seq_start[b], L = layout.seq_start[b + 1] - s0;
    float* p = scores.data() + layout.probs_offset(b, heads);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < L; ++i)
        for (int k = 0; k < L; ++k) {
          double acc = 0.0;
          for (int d = 0; d < D; ++d)
            acc += double(qkv[size_t(s0 + i) * 3 * H + h * D + d]) *
                   qkv[size_t(s0 + k) * 3 * H + H + h * D + d];
          p[(size_t(h) * L + i) * L + k] = static_cast<float>(acc);
        }
  }
  return scores;
}

// Every sequence in one launch: packed (a device table of token starts and probs offsets) and
// padded (no table: offsets by arithmetic).
TEST_F(EmulatedKernels, AttentionSoftmaxMatchesTheCpuAttention) {
  const int heads = 3, D = 8, H = heads * D;
  AttentionLayout packed, padded;
  packed.seq_start = {0, 5, 14, 14, 47};  // ragged: rows of 5, 9, none and 33 keys (a partial warp)
  padded.seq_start = {0, 16, 32, 48};
  auto check = [&](const AttentionLayout& layout) {
    const int T = layout.total_tokens();
    const auto qkv = random_floats(size_t(T) * 3 * H, 27);
    std::vector<float> key_bias(T, 0.0f);
    for (int t : {3, 4, 12, 40, 41, 42, 43, 44, 45, 46}) key_bias[t] = -10000.0f;
    const float scale = 1.0f / std::sqrt(float(D));
    std::vector<int64_t> table(layout.seq_start.begin(), layout.seq_start.end());
    for (int b = 0; b < layout.num_seqs(); ++b) table.push_back(layout.probs_offset(b, heads));
    kernels::SoftmaxSequences seqs{table.data(), layout.num_seqs(), layout.max_len()};
    if (layout.uniform_length() > 0) seqs.table = nullptr;
    for (float p : {0.0f, 0.1f}) {
      const DropoutSite site{99, 3, 11, p};
      const float keep_scale = 1.0f / (1.0f - p);
      const int64_t elems = layout.probs_elems(heads);
      std::vector<float> ctx(size_t(T) * H), e_probs(elems);
      cpu->attention_fwd({ctx.data(), e_probs.data(), qkv.data(), key_bias.data(), layout, heads, D,
                          site});
      std::vector<float> e_dropped(elems);
      cpu->dropout_residual_fwd({e_dropped.data(), e_probs.data(), nullptr, elems, site});

      auto probs = attention_scores(qkv, layout, heads, D);
      std::vector<float> dropped(elems);
      const auto dgrad_in = random_floats(elems, 28);
      auto dgrad = dgrad_in;
      kernels::attention_softmax_fwd(probs.data(), p > 0 ? dropped.data() : nullptr, key_bias.data(),
                                     seqs, heads, scale, site, keep_scale, nullptr);
      kernels::attention_softmax_bwd(dgrad.data(), probs.data(), seqs, heads, scale, site, keep_scale,
                                     nullptr);
      expect_close(probs, e_probs, 1e-6, 1e-5, "attention probs");
      if (p > 0) {
        for (int64_t i = 0; i < elems; ++i)
          ASSERT_EQ(dropped[i] == 0.0f, e_dropped[i] == 0.0f) << "dropout mask at " << i;
        expect_close(dropped, e_dropped, 1e-6, 1e-5, "dropped probs");
      }
      // d(scores) = P ⊙ (dP - Σ_k P·dP) · scale, where dP = dropout_bwd(d(dropped P)).
      std::vector<float> dP(elems), expected(elems);
      cpu->dropout_bwd({dP.data(), dgrad_in.data(), elems, site});
      for (int b = 0; b < layout.num_seqs(); ++b) {
        const int L = layout.seq_start[b + 1] - layout.seq_start[b];
        const int64_t offset = layout.probs_offset(b, heads);
        for (int64_t r = 0; r < int64_t(heads) * L; ++r) {
          const size_t row = offset + r * L;
          double dot = 0.0;
          for (int k = 0; k < L; ++k) dot += double(e_probs[row + k]) * dP[row + k];
          for (int k = 0; k < L; ++k)
            expected[row + k] = static_cast<float>(e_probs[row + k] * (dP[row + k] - dot) * scale);
        }
      }
      expect_close(dgrad, expected, 1e-6, 1e-5, "attention softmax backward");
    }
  };
  check(packed);
  check(padded);
}

TEST_F(EmulatedKernels, SoftmaxCrossEntropyMatchesTheCpu) {
  const int64_t M = 7;
  const int V = 1100, ld = 1104;  // more columns than threads, padding columns
  auto logits = random_floats(M * ld, 29, -5.0f, 5.0f);
  std::vector<int32_t> labels = {3, -1, 1099, 0, 500, -1, 77};
  std::vector<float> dlogits(M * ld, 9.0f), e_dlogits(M * ld, 9.0f), losses(M), e_losses(M);
  std::vector<int32_t> correct(M), e_correct(M);
  std::vector<int32_t> status(4, 0);
  kernels::softmax_xent(dlogits.data(), losses.data(), correct.data(), logits.data(),
                        labels.data(), M, V, ld, 0.25f, status.data(), nullptr);
  EXPECT_EQ(status[0], 0) << "no label is out of range";
  cpu->softmax_xent({e_dlogits.data(), e_losses.data(), e_correct.data(), logits.data(),
                     labels.data(), M, V, ld, 0.25f});
  expect_close(losses, e_losses, 1e-5, 1e-6, "softmax_xent losses");
  expect_equal(correct, e_correct, "softmax_xent correct");
  expect_close(dlogits, e_dlogits, 1e-7, 1e-5, "softmax_xent dlogits");
}

// Out-of-range labels are counted on the device (no host copy of the labels): the status keeps
// the first bad row, its label and V, and accumulates the count over launches until cleared.
TEST_F(EmulatedKernels, SoftmaxCrossEntropyCountsBadLabelsOnTheDevice) {
  const int64_t M = 1200;  // more rows than block 0's threads
  const int V = 40, ld = 40;
  auto logits = random_floats(M * ld, 31, -2.0f, 2.0f);
  std::vector<int32_t> labels = random_ints(M, 32, 0, V - 1);
  labels[700] = V;
  labels[1100] = V + 5;
  labels[1199] = -1;
  std::vector<float> dlogits(M * ld), losses(M);
  std::vector<int32_t> status(4, 0);
  kernels::softmax_xent(dlogits.data(), losses.data(), nullptr, logits.data(), labels.data(), M,
                        V, ld, 1.0f, status.data(), nullptr);
  EXPECT_EQ(status, (std::vector<int32_t>{2, 700, V, V}));
  labels[700] = 0;
  kernels::softmax_xent(dlogits.data(), losses.data(), nullptr, logits.data(), labels.data(), M,
                        V, ld, 1.0f, status.data(), nullptr);
  EXPECT_EQ(status, (std::vector<int32_t>{3, 700, V, V})) << "the first report is kept";
}

TEST_F(EmulatedKernels, CastsRoundLikeTheHostConversions) {
  const int64_t n = 1003;  // vector groups of 8 and a scalar tail
  auto src = random_floats(n + 1, 30, -70000.0f, 70000.0f);
  src[5] = 1e-8f;  // fp16 subnormal
  src[6] = -0.0f;
  for (int64_t offset : {0, 1}) {  // aligned: the 128-bit path; offset by one float: scalar
    const float* in = src.data() + offset;
    std::vector<uint16_t> bits(n + 8);
    for (LowPrecision kind : {LowPrecision::bf16, LowPrecision::fp16}) {
      kernels::cast_to_lowp(bits.data(), in, n, 0.5f, kind, nullptr);
      std::vector<float> back(n);
      kernels::cast_from_lowp(back.data(), bits.data(), n, 2.0f, kind, nullptr);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t expected = kind == LowPrecision::bf16 ? float_to_bf16_bits(in[i] * 0.5f)
                                                             : float_to_fp16_bits(in[i] * 0.5f);
        ASSERT_EQ(bits[i], expected) << "cast_to_lowp element " << i;
        const float e_back = (kind == LowPrecision::bf16 ? bf16_bits_to_float(expected)
                                                         : fp16_bits_to_float(expected)) * 2.0f;
        ASSERT_EQ(back[i], e_back) << "cast_from_lowp element " << i;
      }
    }
  }
}

TEST_F(EmulatedKernels, SequenceLengthsCountLeadingUnmaskedKeys) {
  const std::vector<int32_t> seq_start = {0, 4, 4, 12, 50};  // an empty sequence
  std::vector<float> key_bias(50, 0.0f);
  for (int t = 2; t < 4; ++t) key_bias[t] = -10000.0f;
  for (int t = 30; t < 50; ++t) key_bias[t] = -10000.0f;
  std::vector<int32_t> lengths(4, -1);
  kernels::attention_seq_lengths(lengths.data(), seq_start.data(), 0, key_bias.data(), 4, nullptr);
  expect_equal(lengths, std::vector<int32_t>{2, 0, 8, 18}, "attention_seq_lengths");
  // Without a table: 5 sequences of 10 tokens (the third all padding, the fifth none).
  std::vector<float> uniform_bias(50, -10000.0f);
  const std::vector<int32_t> real = {7, 1, 0, 10, 10};
  for (size_t b = 0; b < real.size(); ++b) std::fill_n(uniform_bias.begin() + 10 * b, real[b], 0.0f);
  std::vector<int32_t> uniform(5, -1);
  kernels::attention_seq_lengths(uniform.data(), nullptr, 10, uniform_bias.data(), 5, nullptr);
  expect_equal(uniform, real, "attention_seq_lengths (one length)");
}

// cuDNN's dropout seed, folded on the device from the site and the step: from the site's step, or
// the one in device memory a recorded call names (each replay's); its offset 0.
TEST_F(EmulatedKernels, AttentionDropoutSeedFoldsTheStepItReads) {
  DropoutSite site{.seed = 0x1234567890abcdefull, .step = 41, .tensor_id = 7, .p = 0.1f};
  std::vector<int64_t> seed(2, -1);
  kernels::attention_dropout_seed(&seed[0], &seed[1], site, nullptr);
  EXPECT_EQ(static_cast<uint64_t>(seed[0]), folded_seed(site.seed, 41, 7));
  EXPECT_EQ(seed[1], 0);
  const uint64_t replay_step = 42;
  site.step_at = &replay_step;
  kernels::attention_dropout_seed(&seed[0], &seed[1], site, nullptr);
  EXPECT_EQ(static_cast<uint64_t>(seed[0]), folded_seed(site.seed, 42, 7));
  // Independent streams: each of step, tensor id and seed changes the folded seed.
  EXPECT_NE(folded_seed(site.seed, 41, 7), folded_seed(site.seed, 42, 7));
  EXPECT_NE(folded_seed(site.seed, 41, 7), folded_seed(site.seed, 41, 8));
  EXPECT_NE(folded_seed(site.seed, 41, 7), folded_seed(site.seed + 1, 41, 7));
  // splitmix64's first output from state 0 (its published test vector) is this finaliser's.
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
}

// The fused attention's padded copies of a packed batch: every padded row written (the cast of its
// packed row, or 0 after the sequence), and back. Lengths 1, 63, 64, 65 and 0 around the padded
// length 128 (the longest, 65, rounded up to 64); widths 24 (groups of 8) and 12 (one element per
// thread), and buffers offset by one element (not 16-byte aligned: one element per thread too).
TEST_F(EmulatedKernels, AttentionPaddingCopiesPackedRowsBothWays) {
  const std::vector<int32_t> seq_start = {0, 1, 64, 128, 128, 193};
  const int seqs = 5;
  const int64_t T = 193, padded_len = 128;
  for (int width : {24, 12}) {
    for (int offset : {0, 1}) {
      const auto src = random_floats(T * width + 1, 40 + width, -3.0f, 3.0f);
      const float* packed = src.data() + offset;
      for (LowPrecision kind : {LowPrecision::bf16, LowPrecision::fp16}) {
        const auto bits_of = [&](float x) {
          return kind == LowPrecision::bf16 ? float_to_bf16_bits(x) : float_to_fp16_bits(x);
        };
        const auto float_of = [&](uint16_t b) {
          return kind == LowPrecision::bf16 ? bf16_bits_to_float(b) : fp16_bits_to_float(b);
        };
        const size_t padded_elems = static_cast<size_t>(seqs * padded_len * width);
        std::vector<uint16_t> storage(padded_elems + 8, 0x7fffu);  // NaN in both formats
        uint16_t* padded = storage.data() + offset;
        kernels::pad_rows_to_lowp(padded, packed, seq_start.data(), seqs, padded_len, width, kind,
                                  nullptr);
        for (int b = 0; b < seqs; ++b) {
          const int64_t len = seq_start[b + 1] - seq_start[b];
          for (int64_t s = 0; s < padded_len; ++s)
            for (int j = 0; j < width; ++j) {
              const uint16_t want =
                  s < len ? bits_of(packed[(seq_start[b] + s) * width + j]) : bits_of(0.0f);
              ASSERT_EQ(padded[(b * padded_len + s) * width + j], want)
                  << "pad_rows_to_lowp: sequence " << b << " row " << s << " column " << j
                  << " (width " << width << ", offset " << offset << ")";
            }
        }
        // Back: NaN in the padding rows proves they are not read into the packed rows.
        for (int b = 0; b < seqs; ++b)
          for (int64_t s = seq_start[b + 1] - seq_start[b]; s < padded_len; ++s)
            std::fill_n(padded + (b * padded_len + s) * width, width, uint16_t{0x7fffu});
        std::vector<float> back_storage(T * width + 4, -1.0f);
        float* back = back_storage.data() + offset;
        kernels::unpad_rows_from_lowp(back, padded, seq_start.data(), seqs, padded_len, width,
                                      kind, nullptr);
        for (int64_t t = 0; t < T; ++t)
          for (int j = 0; j < width; ++j)
            ASSERT_EQ(back[t * width + j], float_of(bits_of(packed[t * width + j])))
                << "unpad_rows_from_lowp: token " << t << " column " << j << " (width " << width
                << ", offset " << offset << ")";

        // Packed rows already 16-bit (16-bit activations): the padded batch copies their bits,
        // and back; rows of the other 16-bit type are refused.
        const DType type = kernels::storage_type(kind);
        std::vector<uint16_t> packed16_storage(T * width + 8);
        uint16_t* packed16 = packed16_storage.data() + offset;
        for (int64_t i = 0; i < T * width; ++i) packed16[i] = bits_of(packed[i]);
        std::vector<uint16_t> copy_storage(padded_elems + 8, 0x7fffu);
        uint16_t* copy = copy_storage.data() + offset;
        kernels::pad_rows_to_lowp(copy, ConstAct(packed16, type), seq_start.data(), seqs, padded_len, width, kind,
                                  nullptr);
        for (int b = 0; b < seqs; ++b)
          for (int64_t s = 0; s < seq_start[b + 1] - seq_start[b]; ++s)
            for (int j = 0; j < width; ++j)
              ASSERT_EQ(copy[(b * padded_len + s) * width + j], padded[(b * padded_len + s) * width + j])
                  << "pad_rows_to_lowp from 16-bit rows: sequence " << b << " row " << s << " column " << j;
        std::vector<uint16_t> back16_storage(T * width + 8, 0);
        uint16_t* back16 = back16_storage.data() + offset;
        kernels::unpad_rows_from_lowp(Act(back16, type), copy, seq_start.data(), seqs, padded_len, width, kind,
                                      nullptr);
        for (int64_t i = 0; i < T * width; ++i)
          ASSERT_EQ(back16[i], packed16[i]) << "unpad_rows_from_lowp to 16-bit rows: element " << i;
        const DType other = type == DType::bf16 ? DType::f16 : DType::bf16;
        try {
          kernels::pad_rows_to_lowp(copy, ConstAct(packed16, other), seq_start.data(), seqs, padded_len, width, kind,
                                    nullptr);
          FAIL() << "packed rows of the other 16-bit type must be refused";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), Code::internal);
          const std::string want = std::string("pad_rows_to_lowp: packed rows of type ") + dtype_name(other) + " for a " +
                                   dtype_name(type) + " padded batch";
          EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
      }
    }
  }
}

}  // namespace
}  // namespace bert
