// The kernels of kernels/ with 16-bit activation storage (bf16 and fp16) against the CPU
// backend's fp32 result, on a GPU or in the CPU emulation (emulated_cuda_kernels_16bit). Inputs are rounded to the storage type first and the
// CPU gets the same (widened) values, so the kernels' only extra error is the rounding of what
// they store: at most the storage type's unit roundoff u (bf16 2^-8, fp16 2^-11) relative to the
// value. Tolerances: exact against the rounded CPU result where both sides do the same fp32
// operations in the same order (embeddings, gathers, dropout, scatter-adds into fp32, column
// sums); otherwise rtol = u plus the fp32 test's tolerance for a different summation order.
// The attention softmax is checked against a double-precision softmax of the same stored scores.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../expect_error.h"
#include "../unit/test_cpu_ops_common.h"
#include "backend/cpu/cpu_activation.h"
#include "backend/cuda/cuda_check.h"
#include "core/half.h"
#include "kernels/activation.h"
#include "kernels/attention_softmax.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/reduce.h"
#include "kernels/rows.h"
#include "kernels/softmax_xent.h"

namespace bert {
namespace {

using testing::expect_error;

using testing::expect_close;
using testing::random_floats;
using testing::random_ints;

// n elements of T in device memory (zero-filled, or a host vector's copy); host() waits for the
// default stream, where the kernels here run, and downloads them.
template <typename T>
class Device {
 public:
  explicit Device(size_t n) : n_(n) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n, 1) * sizeof(T)));
    CUDA_CHECK(cudaMemsetAsync(ptr_, 0, n * sizeof(T), nullptr));
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  explicit Device(const std::vector<T>& host) : Device(host.size()) {
    CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Device() { cudaFree(ptr_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
    CUDA_CHECK(cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};
using Bits = Device<uint16_t>;
using Floats = Device<float>;
using Ints = Device<int32_t>;

// Host vectors in a 16-bit storage type: encode rounds to nearest even (as the kernels' stores
// do), decode widens exactly.
struct Storage {
  DType type;

  double unit_roundoff() const { return type == DType::bf16 ? 1.0 / 256 : 1.0 / 2048; }
  std::vector<uint16_t> encode(const std::vector<float>& x) const {
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      bits[i] = type == DType::bf16 ? float_to_bf16_bits(x[i]) : float_to_fp16_bits(x[i]);
    return bits;
  }
  std::vector<float> decode(const std::vector<uint16_t>& bits) const {
    std::vector<float> x(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      x[i] = type == DType::bf16 ? bf16_bits_to_float(bits[i]) : fp16_bits_to_float(bits[i]);
    return x;
  }
  std::vector<float> round(const std::vector<float>& x) const { return decode(encode(x)); }
  std::vector<float> decode(const Bits& bits) const { return decode(bits.host()); }
  Act act(const Bits& bits) const { return Act(bits.get(), type); }
  ConstAct in(const Bits& bits) const { return ConstAct(bits.get(), type); }
};

class Kernels16 : public ::testing::TestWithParam<DType> {
 protected:
  std::unique_ptr<Ops> cpu = make_cpu_ops(1);
  Storage st{GetParam()};
  // rtol of a stored result whose fp32 computation is within rtol32 of the CPU's.
  double rtol(double rtol32) const { return 1.001 * st.unit_roundoff() + rtol32; }
};

void expect_equal(const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_EQ(actual[i], expected[i]) << what << " differs at element " << i;
}

TEST_P(Kernels16, Activations) {
  const int64_t n = 1000;
  const auto pre = st.round(random_floats(n, 1, -4.0f, 4.0f));
  const auto dout = st.round(random_floats(n, 2));
  const Bits pre16(st.encode(pre)), dout16(st.encode(dout));
  for (Activation act : {Activation::gelu_erf, Activation::gelu_tanh, Activation::tanh}) {
    const Bits out(n), dpre(n);
    std::vector<float> expected(n), expected_dpre(n);
    kernels::activation_fwd(st.act(out), st.in(pre16), n, act, nullptr);
    cpu->activation_fwd({expected.data(), pre.data(), n, act});
    expect_close(st.decode(out), expected, 1e-6, rtol(1e-6), "activation_fwd");
    kernels::activation_bwd(st.act(dpre), st.in(dout16), st.in(pre16), n, act, nullptr);
    dispatch_activation(act, [&](auto tag) {
      for (int64_t i = 0; i < n; ++i) expected_dpre[i] = dout[i] * activation_grad<decltype(tag)::value>(pre[i]);
    });
    expect_close(st.decode(dpre), expected_dpre, 1e-6, rtol(1e-6), "activation_bwd");
  }
}

TEST_P(Kernels16, DropoutIsTheRoundedCpuResult) {
  const int64_t n = 1027;
  const auto in = st.round(random_floats(n, 3)), residual = st.round(random_floats(n, 4));
  const Bits in16(st.encode(in)), residual16(st.encode(residual));
  for (float p : {0.0f, 0.1f}) {
    const DropoutSite site{1234, 7, 5, p};
    const float keep_scale = 1.0f / (1.0f - p);
    const Bits out(n);
    std::vector<float> expected(n);
    kernels::dropout_residual_fwd(st.act(out), st.in(in16), st.in(residual16), n, site, keep_scale, 0, nullptr);
    cpu->dropout_residual_fwd({expected.data(), in.data(), residual.data(), n, site});
    expect_equal(st.decode(out), st.round(expected), "dropout_residual_fwd");
    kernels::dropout_bwd(st.act(out), st.in(in16), n, site, keep_scale, nullptr);
    cpu->dropout_bwd({expected.data(), in.data(), n, site});
    expect_equal(st.decode(out), st.round(expected), "dropout_bwd");
  }
}

TEST_P(Kernels16, EmbeddingsGathersAndScatterAdds) {
  const int64_t T = 45;
  const int H = 72, V = 17, P = 20;
  const auto word = random_floats(size_t(V) * H, 5), pos = random_floats(size_t(P) * H, 6),
             type = random_floats(2 * size_t(H), 7);
  const auto word_ids = random_ints(T, 8, 0, V - 1), pos_ids = random_ints(T, 9, 0, P - 1),
             type_ids = random_ints(T, 10, 0, 1);
  const Floats d_word(word), d_pos(pos), d_type(type);
  const Ints d_word_ids(word_ids), d_pos_ids(pos_ids), d_type_ids(type_ids);
  const Bits out(T * H);
  std::vector<float> expected(T * H);
  kernels::embedding_fwd(st.act(out), d_word_ids.get(), d_pos_ids.get(), d_type_ids.get(), d_word.get(),
                         d_pos.get(), d_type.get(), T, H, nullptr);
  cpu->embedding_fwd({expected.data(), word_ids.data(), pos_ids.data(), type_ids.data(), word.data(), pos.data(),
                      type.data(), T, H});
  expect_equal(st.decode(out), st.round(expected), "embedding_fwd");

  const auto table = st.round(random_floats(size_t(V) * H, 11));
  const Bits table16(st.encode(table)), gathered(T * H);
  kernels::gather_rows(st.act(gathered), st.in(table16), d_word_ids.get(), T, H, nullptr);
  cpu->gather_rows({expected.data(), table.data(), word_ids.data(), T, H});
  expect_equal(st.decode(gathered), expected, "gather_rows");

  // 16-bit rows into fp32 gradients (the embedding backward), and into 16-bit rows.
  const auto src = st.round(random_floats(T * H, 12));
  const Bits src16(st.encode(src));
  const Device<char> scratch(kernels::scatter_add_scratch_bytes(T));
  const size_t scratch_bytes = kernels::scatter_add_scratch_bytes(T);
  const auto dst_start = random_floats(size_t(V) * H, 13);
  const Floats dst(dst_start);
  auto expected_dst = dst_start;
  kernels::scatter_add_rows(dst.get(), st.in(src16), d_word_ids.get(), T, H, scratch.get(), scratch_bytes, nullptr);
  cpu->scatter_add_rows({expected_dst.data(), src.data(), word_ids.data(), T, H});
  expect_equal(dst.host(), expected_dst, "scatter_add_rows into fp32");
  const auto dst16_start = st.encode(random_floats(size_t(V) * H, 14));
  const Bits dst16(dst16_start);
  expected_dst = st.decode(dst16_start);
  kernels::scatter_add_rows(st.act(dst16), st.in(src16), d_word_ids.get(), T, H, scratch.get(), scratch_bytes,
                            nullptr);
  cpu->scatter_add_rows({expected_dst.data(), src.data(), word_ids.data(), T, H});
  expect_equal(st.decode(dst16), st.round(expected_dst), "scatter_add_rows into 16 bits");
}

TEST_P(Kernels16, LayerNormAndTheResidualBlock) {
  const int64_t M = 37;
  for (int N : {40, 768}) {
    const auto in = st.round(random_floats(M * N, 15, -3.0f, 3.0f));
    const auto residual = st.round(random_floats(M * N, 16));
    const auto dout = st.round(random_floats(M * N, 17));
    const auto gamma = random_floats(N, 18), beta = random_floats(N, 19);
    const Bits in16(st.encode(in)), residual16(st.encode(residual)), dout16(st.encode(dout));
    const Floats d_gamma(gamma), d_beta(beta), mean(M), rstd(M);
    const Bits out(M * N);
    std::vector<float> e_out(M * N), e_mean(M), e_rstd(M);
    kernels::layernorm_fwd(st.act(out), mean.get(), rstd.get(), st.in(in16), d_gamma.get(), d_beta.get(), M, N,
                           1e-12f, nullptr);
    cpu->layernorm_fwd({e_out.data(), e_mean.data(), e_rstd.data(), in.data(), gamma.data(), beta.data(), M, N,
                        1e-12f});
    expect_close(st.decode(out), e_out, 1e-5, rtol(1e-5), "layernorm_fwd out");
    expect_close(mean.host(), e_mean, 1e-6, 1e-6, "layernorm_fwd mean (fp32)");
    expect_close(rstd.host(), e_rstd, 1e-6, 1e-6, "layernorm_fwd rstd (fp32)");

    const Floats saved_mean(e_mean), saved_rstd(e_rstd);
    const Bits din(M * N);
    std::vector<float> e_din(M * N), e_dgamma(N), e_dbeta(N);
    {
      const Floats dgamma(N), dbeta(N);
      const Device<double> partials(size_t(kernels::layernorm_param_chunks(M)) * 2 * N);
      kernels::layernorm_bwd_input(st.act(din), st.in(dout16), st.in(in16), saved_mean.get(), saved_rstd.get(),
                                   d_gamma.get(), M, N, nullptr);
      kernels::layernorm_bwd_params(dgamma.get(), dbeta.get(), st.in(dout16), st.in(in16), saved_mean.get(),
                                    saved_rstd.get(), M, N, partials.get(), nullptr);
      cpu->layernorm_bwd({e_din.data(), e_dgamma.data(), e_dbeta.data(), dout.data(), in.data(), e_mean.data(),
                          e_rstd.data(), gamma.data(), M, N});
      expect_close(st.decode(din), e_din, 1e-5, rtol(1e-5), "layernorm_bwd din");
      expect_close(dgamma.host(), e_dgamma, 1e-5, 1e-6, "layernorm_bwd dgamma (fp32)");
      expect_close(dbeta.host(), e_dbeta, 1e-5, 1e-6, "layernorm_bwd dbeta (fp32)");
    }

    const DropoutSite site{77, 2, 9, 0.1f};
    const float keep_scale = 1.0f / (1.0f - site.p);
    const Bits res(M * N);
    std::vector<float> e_res(M * N);
    kernels::residual_layernorm_fwd(st.act(out), st.act(res), mean.get(), rstd.get(), st.in(in16),
                                    st.in(residual16), d_gamma.get(), d_beta.get(), M, N, 1e-12f, site, keep_scale,
                                    nullptr);
    cpu->residual_layernorm_fwd({e_out.data(), e_res.data(), e_mean.data(), e_rstd.data(), in.data(), residual.data(),
                                 gamma.data(), beta.data(), M, N, 1e-12f, site});
    expect_equal(st.decode(res), st.round(e_res), "residual_layernorm_fwd res");
    expect_close(st.decode(out), e_out, 1e-5, rtol(1e-5), "residual_layernorm_fwd out");
    expect_close(mean.host(), e_mean, 1e-6, 1e-6, "residual_layernorm_fwd mean (fp32)");
    expect_close(rstd.host(), e_rstd, 1e-6, 1e-6, "residual_layernorm_fwd rstd (fp32)");

    // The backward reads the stored (rounded) res, the model's saved tensor, and fp32 statistics.
    const auto res_stored = st.decode(res);
    const Floats fused_mean(e_mean), fused_rstd(e_rstd), dgamma(N), dbeta(N);
    const Bits d_residual(M * N);
    const Device<double> partials(size_t(kernels::residual_layernorm_chunks(M)) * 2 * N);
    std::vector<float> e_d_residual(M * N);
    std::fill(e_dgamma.begin(), e_dgamma.end(), 0.0f);
    std::fill(e_dbeta.begin(), e_dbeta.end(), 0.0f);
    kernels::residual_layernorm_bwd(st.act(din), st.act(d_residual), dgamma.get(), dbeta.get(), st.in(dout16),
                                    st.in(res), fused_mean.get(), fused_rstd.get(), d_gamma.get(), M, N, site,
                                    keep_scale, partials.get(), nullptr);
    cpu->residual_layernorm_bwd({e_din.data(), e_d_residual.data(), e_dgamma.data(), e_dbeta.data(), dout.data(),
                                 res_stored.data(), e_mean.data(), e_rstd.data(), gamma.data(), M, N, site});
    expect_close(st.decode(din), e_din, 1e-5, rtol(1e-5), "residual_layernorm_bwd d_in");
    expect_close(st.decode(d_residual), e_d_residual, 1e-5, rtol(1e-5), "residual_layernorm_bwd d_residual");
    expect_close(dgamma.host(), e_dgamma, 1e-5, 1e-6, "residual_layernorm_bwd dgamma (fp32)");
    expect_close(dbeta.host(), e_dbeta, 1e-5, 1e-6, "residual_layernorm_bwd dbeta (fp32)");
  }
}

TEST_P(Kernels16, ColumnSumOf16BitRows) {
  const int64_t M = 150;
  const int K = 3, N = 70;
  const auto dout = st.round(random_floats(M * N, 20));
  const auto in = random_floats(M * K, 21), W = random_floats(size_t(N) * K, 22);
  const auto db_start = random_floats(N, 23);
  auto e_db = db_start;
  const Floats db(db_start);
  const Bits dout16(st.encode(dout));
  const Device<double> partials(size_t(kernels::column_sum_chunks(M)) * N);
  kernels::column_sum_add(db.get(), st.in(dout16), M, N, partials.get(), nullptr);
  std::vector<float> dW(size_t(N) * K);
  cpu->linear_bwd({nullptr, dW.data(), e_db.data(), dout.data(), in.data(), W.data(), nullptr, nullptr, M, K, N,
                   Activation::none, false});
  expect_close(db.host(), e_db, 2e-6, 1e-6, "column_sum_add (fp32 result)");
}

TEST_P(Kernels16, AttentionSoftmax) {
  const int heads = 3;
  AttentionLayout layout;
  layout.seq_start = {0, 5, 14, 14, 47};  // ragged: rows of 5, 9, none and 33 keys (a partial warp)
  const int T = layout.total_tokens();
  std::vector<float> key_bias(T, 0.0f);
  for (int t : {3, 4, 12, 40, 41, 42, 43, 44, 45, 46}) key_bias[t] = -10000.0f;
  std::vector<int64_t> table(layout.seq_start.begin(), layout.seq_start.end());
  for (int b = 0; b < layout.num_seqs(); ++b) table.push_back(layout.probs_offset(b, heads));
  const Device<int64_t> d_table(table);
  const Floats d_key_bias(key_bias);
  const kernels::SoftmaxSequences seqs{d_table.get(), layout.num_seqs(), layout.max_len()};
  const float scale = 0.35f;
  const int64_t elems = layout.probs_elems(heads);
  const auto scores = st.round(random_floats(elems, 24, -4.0f, 4.0f));
  const auto dgrad_in = st.round(random_floats(elems, 25));
  for (float p : {0.0f, 0.1f}) {
    const DropoutSite site{99, 3, 11, p};
    const float keep_scale = 1.0f / (1.0f - p);
    const Bits probs(st.encode(scores)), dgrad(st.encode(dgrad_in)), dropped(elems);
    kernels::attention_softmax_fwd(st.act(probs), p > 0 ? st.act(dropped) : Act(nullptr, st.type), d_key_bias.get(),
                                   seqs, heads, scale, site, keep_scale, nullptr);
    kernels::attention_softmax_bwd(st.act(dgrad), st.in(probs), seqs, heads, scale, site, keep_scale, nullptr);
    // Per row: softmax in double of the stored scores, and the backward from the stored P.
    const auto P = st.decode(probs);
    std::vector<float> dP(elems);
    cpu->dropout_bwd({dP.data(), dgrad_in.data(), elems, site});
    std::vector<double> e_probs(elems), e_dgrad(elems);
    for (int b = 0; b < layout.num_seqs(); ++b) {
      const int s0 = layout.seq_start[b], L = layout.seq_start[b + 1] - s0;
      for (int64_t r = 0; r < int64_t(heads) * L; ++r) {
        const size_t row = layout.probs_offset(b, heads) + r * L;
        auto score = [&](int k) { return double(scores[row + k]) * scale + key_bias[s0 + k]; };
        double max = -INFINITY, sum = 0.0, dot = 0.0;
        for (int k = 0; k < L; ++k) max = std::fmax(max, score(k));
        for (int k = 0; k < L; ++k) sum += std::exp(score(k) - max);
        for (int k = 0; k < L; ++k) e_probs[row + k] = std::exp(score(k) - max) / sum;
        for (int k = 0; k < L; ++k) dot += double(P[row + k]) * dP[row + k];
        for (int k = 0; k < L; ++k) e_dgrad[row + k] = P[row + k] * (dP[row + k] - dot) * scale;
      }
    }
    expect_close(P, e_probs, 1e-6, rtol(1e-5), "attention probs");
    expect_close(st.decode(dgrad), e_dgrad, 1e-6, rtol(1e-5), "attention softmax backward");
    if (p > 0) {  // dropped = P ⊙ mask / (1 - p): the CPU's mask, P rounded once when stored
      const std::vector<float> ones(elems, 1.0f);
      std::vector<float> mask(elems);
      std::vector<double> e_dropped(elems);
      cpu->dropout_bwd({mask.data(), ones.data(), elems, site});
      for (int64_t i = 0; i < elems; ++i) e_dropped[i] = e_probs[i] * mask[i];
      expect_close(st.decode(dropped), e_dropped, 1e-6, rtol(1e-5), "dropped probs");
    }
  }
}

TEST_P(Kernels16, SoftmaxCrossEntropy) {
  const int64_t M = 7;
  const int V = 1100, ld = 1104;  // more columns than threads, padding columns
  const auto logits = st.round(random_floats(M * ld, 26, -5.0f, 5.0f));
  const std::vector<int32_t> labels = {3, -1, 1099, 0, 500, -1, 77};
  const Bits grad16(st.encode(logits));  // the gradient overwrites the logits, as the model calls it
  const Ints d_labels(labels), correct(M), status(4);
  const Floats losses(M);
  std::vector<float> e_losses(M), e_dlogits(M * ld, 9.0f);
  std::vector<int32_t> e_correct(M);
  kernels::softmax_xent(st.act(grad16), losses.get(), correct.get(), st.in(grad16), d_labels.get(), M, V, ld, 0.25f,
                        status.get(), nullptr);
  EXPECT_EQ(status.host()[0], 0);
  cpu->softmax_xent({e_dlogits.data(), e_losses.data(), e_correct.data(), logits.data(), labels.data(), M, V, ld,
                     0.25f});
  expect_close(losses.host(), e_losses, 1e-5, 1e-6, "softmax_xent losses (fp32)");
  EXPECT_EQ(correct.host(), e_correct);
  expect_close(st.decode(grad16), e_dlogits, 1e-7, rtol(1e-5), "softmax_xent dlogits");
}

TEST_P(Kernels16, MixedStorageTypesAreRejected) {
  const Bits a(8);
  const Floats b(8);
  expect_error([&] { kernels::activation_fwd(st.act(a), b.get(), 8, Activation::tanh, nullptr); }, Code::internal,
               {"activation_fwd: activation tensors of different storage types"});
}

INSTANTIATE_TEST_SUITE_P(Storage, Kernels16, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); });

}  // namespace
}  // namespace bert
