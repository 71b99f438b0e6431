// LtGemm with 16-bit activations (bf16 and fp16 modes), on a GPU or in the emulation
// (emulated_lt_gemm_16bit, whose cuBLASLt stand-in rounds a 16-bit D from the fp32 accumulator as
// cuBLASLt does): a 16-bit operand is read as it is, a 16-bit C receives the rounded result with a
// 16-bit bias and GELU aux, and a weight-gradient GEMM of 16-bit operands accumulates into fp32.
// References in double from the same 16-bit values. Products of two 16-bit values are exact in
// fp32, so fp32 results differ only by the summation order (rtol 1e-5); 16-bit results also by
// their rounding, at most the unit roundoff u (bf16 2^-8, fp16 2^-11) relative.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../unit/test_cpu_ops_common.h"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_check.h"
#include "core/half.h"
#include "core/log.h"
#include "gpu_random.h"
#include "../expect_error.h"

namespace bert {
namespace {

using testing::expect_error;

using testing::expect_close;
using testing::randn;

constexpr int64_t M = 37;
constexpr int K = 64, N = 40;

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// While it lives, the emulated cuBLASLt refuses what `what` names (BERT_EMU_LT_REFUSE: bias_epilogue
// or all; a GPU ignores it) and warnings are collected into *warnings when given; undone on any exit.
struct Refusal {
  Refusal(const char* what, std::vector<std::string>* warnings) {
    if (warnings != nullptr) {
      set_log_sink([warnings](int level, const char* message) {
        if (level == log_warning) warnings->emplace_back(message);
      });
    }
    setenv("BERT_EMU_LT_REFUSE", what, 1);
  }
  ~Refusal() {
    unsetenv("BERT_EMU_LT_REFUSE");
    set_log_sink(nullptr);
  }
  Refusal(const Refusal&) = delete;
  Refusal& operator=(const Refusal&) = delete;
};

class LtGemm16 : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    CUDA_CHECK(cudaStreamCreate(&stream));
    memory = std::make_unique<DeviceMemory>(stream);
    gemm = std::make_unique<LtGemm>(GetParam(), *memory, stream);
  }
  void TearDown() override {
    for (void* p : buffers) memory->release(p);
    gemm.reset();
    memory.reset();
    cudaStreamDestroy(stream);
  }
  DType type() const { return GetParam() == Precision::bf16 ? DType::bf16 : DType::f16; }
  double unit_roundoff() const { return type() == DType::bf16 ? 1.0 / 256 : 1.0 / 2048; }
  uint16_t bits(float x) const { return type() == DType::bf16 ? float_to_bf16_bits(x) : float_to_fp16_bits(x); }
  float value(uint16_t b) const { return type() == DType::bf16 ? bf16_bits_to_float(b) : fp16_bits_to_float(b); }
  std::vector<float> rounded(std::vector<float> x) const {
    for (float& v : x) v = value(bits(v));
    return x;
  }
  // Device copies: 16-bit (of rounded values) or fp32.
  Act upload16(const std::vector<float>& x) {
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) b[i] = bits(x[i]);
    void* p = device(b.size() * 2);
    CUDA_CHECK(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    return Act(p, type());
  }
  float* upload32(const std::vector<float>& x) {
    void* p = device(x.size() * 4);
    CUDA_CHECK(cudaMemcpy(p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    return static_cast<float*>(p);
  }
  std::vector<float> download16(Act a, size_t n) {
    std::vector<uint16_t> b(n);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(b.data(), a.data, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = value(b[i]);
    return x;
  }
  std::vector<float> download32(const float* p, size_t n) {
    std::vector<float> x(n);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(x.data(), p, n * 4, cudaMemcpyDeviceToHost));
    return x;
  }
  // out [M, n] = in [M, K] · W [n, K]^T + bias (epilogue bias).
  static GemmArgs linear(ConstAct in, const float* W, Act out, int n, const float* bias) {
    GemmArgs g;
    g.trans_b = true;
    g.m = M;
    g.n = n;
    g.k = K;
    g.A = in;
    g.lda = K;
    g.B = W;
    g.ldb = K;
    g.C = out;
    g.ldc = n;
    g.epilogue = GemmEpilogue::bias;
    g.bias = bias;
    return g;
  }
  void* device(size_t bytes) {
    buffers.push_back(memory->alloc(bytes));
    return buffers.back();
  }

  cudaStream_t stream = nullptr;
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<LtGemm> gemm;
  std::vector<void*> buffers;
};

// out [M, N] = in [M, K] · W [N, K]^T + b: in and out 16-bit, W and b fp32 (cast by LtGemm).
TEST_P(LtGemm16, LinearForwardWrites16BitOutputs) {
  const auto in = rounded(randn(M * K, 1, 0.5f)), W = rounded(randn(N * K, 2, 0.2f));
  const auto b = rounded(randn(N, 3, 0.5f));
  for (GemmEpilogue epilogue : {GemmEpilogue::bias, GemmEpilogue::gelu_aux_bias}) {
    GemmArgs g = linear(upload16(in), upload32(W), upload16(std::vector<float>(M * N, 7.0f)), N, upload32(b));
    g.epilogue = epilogue;
    if (epilogue == GemmEpilogue::gelu_aux_bias) g.aux = upload16(std::vector<float>(M * N, 7.0f));
    if (!gemm->supported(g)) GTEST_SKIP() << "cuBLASLt offers no algorithm for this epilogue here";
    gemm->run(g);
    std::vector<double> pre(M * N), out(M * N);
    for (int64_t i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double acc = b[j];
        for (int k = 0; k < K; ++k) acc += double(in[i * K + k]) * W[j * K + k];
        pre[i * N + j] = acc;
        out[i * N + j] = epilogue == GemmEpilogue::bias ? acc : gelu_tanh(acc);
      }
    const double rtol = 1.001 * unit_roundoff() + 1e-5;
    expect_close(download16(g.C, M * N), out, 2e-5, rtol, "16-bit out");
    if (epilogue == GemmEpilogue::gelu_aux_bias) expect_close(download16(g.aux, M * N), pre, 2e-5, rtol, "16-bit aux");
  }
}

// The NSP head's shape (N = 2) with a bias. In the emulation a second LtGemm runs it with the bias
// epilogue refused (BERT_EMU_LT_REFUSE=bias_epilogue): the bias is written into C and added with
// beta = 1, once, with a warning, bitwise equal to the epilogue (both round acc + bias once). On a
// GPU the variable changes nothing, and both runs check the epilogue at this shape.
TEST_P(LtGemm16, ABiasEpilogueCuBlasLtRefusesIsAddedAsC) {
  constexpr int n = 2;
  const auto in = rounded(randn(M * K, 7, 0.5f)), W = rounded(randn(n * K, 8, 0.2f));
  const auto b = rounded(randn(n, 9, 0.5f));
  const Act in16 = upload16(in);
  float* W32 = upload32(W);
  float* b32 = upload32(b);
  auto run_on = [&](LtGemm& lt) {
    const GemmArgs g = linear(in16, W32, upload16(std::vector<float>(M * n, 7.0f)), n, b32);
    lt.run(g);
    lt.run(g);  // the second call finds its choice cached
    return download16(g.C, M * n);
  };
  const std::vector<float> fused = run_on(*gemm);
  std::vector<std::string> warnings;
  std::vector<float> as_c;
  {
    const Refusal refusal("bias_epilogue", &warnings);
    LtGemm refused(GetParam(), *memory, stream);
    as_c = run_on(refused);
  }
  std::vector<double> expected(M * n);
  for (int64_t i = 0; i < M; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = b[j];
      for (int k = 0; k < K; ++k) acc += double(in[i * K + k]) * W[j * K + k];
      expected[i * n + j] = acc;
    }
  const double rtol = 1.001 * unit_roundoff() + 1e-5;
  expect_close(fused, expected, 2e-5, rtol, "bias epilogue");
  expect_close(as_c, expected, 2e-5, rtol, "bias as C");
  for (int64_t i = 0; i < M * n; ++i) ASSERT_EQ(as_c[i], fused[i]) << "element " << i;
  if (!warnings.empty()) {
    ASSERT_EQ(warnings.size(), 1u) << "warned once per shape";
    EXPECT_NE(warnings[0].find("cuBLASLt offers no bias epilogue for gemm m=37 n=2 k=64"), std::string::npos)
        << warnings[0];
  }
#ifdef BERT_KERNEL_EMULATION
  EXPECT_EQ(warnings.size(), 1u) << "the emulation refused the epilogue, so the fallback ran";
#endif
}

// When cuBLASLt refuses the bias-as-C GEMM too (the emulation refusing every GEMM), the run fails
// with Error(backend) naming that GEMM. Only the emulation can arrange the refusal.
TEST_P(LtGemm16, AGemmCuBlasLtHasNoAlgorithmForFailsNamingIt) {
#ifndef BERT_KERNEL_EMULATION
  GTEST_SKIP() << "only the emulated cuBLASLt can be made to refuse a GEMM";
#endif
  const GemmArgs g = linear(upload16(std::vector<float>(M * K, 1.0f)), upload32(std::vector<float>(2 * K, 1.0f)),
                            upload16(std::vector<float>(M * 2, 0.0f)), 2, upload32(std::vector<float>(2, 1.0f)));
  const Refusal refusal("all", nullptr);
  LtGemm refused(GetParam(), *memory, stream);
  expect_error([&] { refused.run(g); }, Code::backend,
               {"cuBLASLt has no algorithm for gemm m=37 n=2 k=64 batch=1 trans_a=0 trans_b=1 epilogue=0 beta=1"});
}

// cuBLASLt refusing its heuristic's first algorithm at run time (NOT_SUPPORTED from cublasLtMatmul):
// LtGemm runs the next one it offered, with the same result; refusing them all fails naming the
// GEMM (the emulation arranges the refusals).
TEST_P(LtGemm16, AnAlgorithmRefusedAtRunTimeFallsThroughToTheNext) {
#ifndef BERT_KERNEL_EMULATION
  GTEST_SKIP() << "only the emulated cuBLASLt can be made to refuse an algorithm at run time";
#endif
  const auto in = rounded(randn(M * K, 10, 0.5f)), W = rounded(randn(N * K, 11, 0.2f));
  const Act in16 = upload16(in);
  float* W32 = upload32(W);
  float* b32 = upload32(rounded(randn(N, 12, 0.5f)));
  auto run_on = [&](LtGemm& lt) {
    const GemmArgs g = linear(in16, W32, upload16(std::vector<float>(M * N, 7.0f)), N, b32);
    lt.run(g);
    lt.run(g);  // the algorithm that ran is tried first now
    return download16(g.C, M * N);
  };
  const std::vector<float> first = run_on(*gemm);
  {
    const Refusal refusal("first_algorithm", nullptr);
    LtGemm refused(GetParam(), *memory, stream);
    EXPECT_EQ(run_on(refused), first);
  }
  // Every algorithm refused at run time: Error(backend) naming the GEMM.
  const Refusal refusal("every_algorithm", nullptr);
  LtGemm refused(GetParam(), *memory, stream);
  expect_error([&] { run_on(refused); }, Code::backend,
               {"cuBLASLt refused at run time all 3 algorithms its heuristic offered for gemm m=" + std::to_string(M) +
                " n=" + std::to_string(N) + " k=" + std::to_string(K) + " batch=1 epilogue=1"});
}

// dW [N, K] += dpre [M, N]^T · in [M, K] with both operands 16-bit: fp32 accumulation into fp32.
TEST_P(LtGemm16, WeightGradientAccumulatesIntoFp32) {
  const auto dpre = rounded(randn(M * N, 4, 0.5f)), in = rounded(randn(M * K, 5, 0.5f));
  const auto dW0 = randn(N * K, 6, 0.1f);
  GemmArgs g;
  g.trans_a = true;
  g.m = N;
  g.n = K;
  g.k = M;
  g.A = upload16(dpre);
  g.lda = N;
  g.B = upload16(in);
  g.ldb = K;
  float* dW = upload32(dW0);
  g.C = dW;
  g.ldc = K;
  g.beta = 1.0f;
  gemm->run(g);
  std::vector<double> expected(N * K);
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) {
      double acc = dW0[j * K + k];
      for (int64_t i = 0; i < M; ++i) acc += double(dpre[i * N + j]) * in[i * K + k];
      expected[j * K + k] = acc;
    }
  expect_close(download32(dW, N * K), expected, 1e-5, 1e-5, "fp32 dW");
}

// An operand of the other 16-bit type is an engine bug: Error(internal) naming both.
TEST_P(LtGemm16, RejectsTheOther16BitType) {
  GemmArgs g;
  g.m = 2;
  g.n = 2;
  g.k = 2;
  const DType other = type() == DType::bf16 ? DType::f16 : DType::bf16;
  g.A = ConstAct(device(8), other);
  g.lda = 2;
  g.B = upload32(std::vector<float>(4, 1.0f));
  g.ldb = 2;
  g.C = upload32(std::vector<float>(4, 0.0f));
  g.ldc = 2;
  expect_error([&] { gemm->run(g); }, Code::internal,
               {std::string("gemm: a ") + dtype_name(other) + " operand in " +
                (type() == DType::bf16 ? "bf16" : "fp16") + " precision"});
}

INSTANTIATE_TEST_SUITE_P(Precision, LtGemm16, ::testing::Values(Precision::bf16, Precision::fp16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(precision_name(info.param));
                         });

}  // namespace
}  // namespace bert
