// CostModelOps without an inner backend: the kernels it records for a bf16 dense layer (the
// operand cast, the weight-mirror refresh once per weights_changed, the GEMM's bytes and FLOPs),
// the same layer on 16-bit activations (no activation cast, 16-bit output and bias), the roofline
// time of a kernel, and the errors for unknown devices and precisions and 16-bit activations in
// an fp32/tf32 precision; cuDNN's fused attention at its published rate; collectives on their
// own stream beside the kernels.
#include <gtest/gtest.h>

#include <cmath>

#include <string>

#include "core/error.h"
#include "perf/cost_model_ops.h"

namespace bert {
namespace {

TEST(CostModel, Bf16DenseLayerCastsItsInputAndReadsWeightsFromTheMirror) {
  CostModelOps ops(CostModelOptions{});
  const int64_t M = 256, K = 64, N = 32;
  auto* weights = static_cast<float*>(ops.alloc((N * K + N) * sizeof(float)));
  auto* in = static_cast<float*>(ops.alloc(M * K * sizeof(float)));
  auto* out = static_cast<float*>(ops.alloc(M * N * sizeof(float)));
  ops.set_weights(weights, N * K + N);
  for (int call = 0; call < 2; ++call) ops.linear_fwd({out, nullptr, in, weights, weights + N * K, M, K, N, Activation::none});
  const std::vector<KernelCost>& k = ops.kernels();
  ASSERT_EQ(k.size(), 5u);  // weight refresh, input cast, GEMM; then input cast, GEMM
  EXPECT_EQ(k[0].kind, "cast (weights)");
  EXPECT_EQ(k[0].read_bytes, 4.0 * (N * K + N));
  EXPECT_EQ(k[1].kind, "cast (activations)");
  EXPECT_EQ(k[1].write_bytes, 2.0 * M * K);
  EXPECT_EQ(k[2].kind, "gemm");
  EXPECT_EQ(k[2].flops, 2.0 * M * N * K);
  EXPECT_EQ(k[2].read_bytes, 2.0 * (M * K + N * K) + 4.0 * N);  // 16-bit operands, fp32 bias
  EXPECT_EQ(k[2].write_bytes, 4.0 * M * N);
  EXPECT_EQ(k[2].unit, MathUnit::tensor16);
  EXPECT_EQ(k[3].kind, "cast (activations)") << "the mirror is refreshed only after weights_changed";
  ops.weights_changed();
  ops.linear_fwd({out, nullptr, in, weights, weights + N * K, M, K, N, Activation::none});
  EXPECT_EQ(ops.kernels()[5].kind, "cast (weights)");
  for (void* p : {static_cast<void*>(weights), static_cast<void*>(in), static_cast<void*>(out)}) ops.release(p);
}

TEST(CostModel, Bf16DenseLayerOnSixteenBitActivationsCastsOnlyTheWeights) {
  CostModelOptions options;
  options.activations_16bit = true;
  CostModelOps ops(options);
  ASSERT_EQ(ops.activation_type(), DType::bf16);
  const int64_t M = 256, K = 64, N = 32;
  auto* weights = static_cast<float*>(ops.alloc((N * K + N) * sizeof(float)));
  void* in = ops.alloc(M * K * 2);
  void* out = ops.alloc(M * N * 2);
  ops.set_weights(weights, N * K + N);
  ops.linear_fwd({Act(out, DType::bf16), nullptr, ConstAct(in, DType::bf16), weights, weights + N * K, M, K, N,
                  Activation::none});
  const std::vector<KernelCost>& k = ops.kernels();
  ASSERT_EQ(k.size(), 2u);  // weight refresh, GEMM: the 16-bit input is read as it is
  EXPECT_EQ(k[0].kind, "cast (weights)");
  EXPECT_EQ(k[1].kind, "gemm");
  EXPECT_EQ(k[1].read_bytes, 2.0 * (M * K + N * K) + 2.0 * N);  // 16-bit operands and bias (the mirror's)
  EXPECT_EQ(k[1].write_bytes, 2.0 * M * N);
  for (void* p : {static_cast<void*>(weights), in, out}) ops.release(p);
}

TEST(CostModel, KernelTimeIsTheRooflinePlusLaunch) {
  const DeviceModel h100 = device_model("h100");
  KernelCost gemm;
  gemm.flops = 989e9;  // 1 ms of bf16 tensor-core work, 3.35 MB in 1 µs
  gemm.read_bytes = 3.35e6;
  gemm.unit = MathUnit::tensor16;
  EXPECT_NEAR(kernel_seconds(gemm, h100), 1e-3 + 4e-6, 1e-12);
  gemm.graphed = true;
  EXPECT_NEAR(kernel_seconds(gemm, h100), 1e-3, 1e-12);
  KernelCost copy;
  copy.read_bytes = copy.write_bytes = 3.35e9;  // 2 ms of bandwidth
  copy.graphed = true;
  EXPECT_NEAR(kernel_seconds(copy, device_model("a100")), 6.7e9 / 2.0e12, 1e-12);
}

// A measured device's kernel kinds take their roofline time over the share of it they reached.
TEST(CostModel, MeasuredKindsTakeTheirShareOfTheRoofline) {
  DeviceModel d = device_model("h100");
  d.kind_efficiency = {{"layernorm", 0.25}};
  KernelCost layernorm;
  layernorm.kind = "layernorm";
  layernorm.read_bytes = 3.35e9;  // 1 ms of bandwidth
  layernorm.graphed = true;
  EXPECT_NEAR(kernel_seconds(layernorm, d), 4e-3, 1e-12);
  KernelCost other = layernorm;
  other.kind = "activation";  // not listed: all of the roofline
  EXPECT_NEAR(kernel_seconds(other, d), 1e-3, 1e-12);
  layernorm.graphed = false;  // the launch is not scaled
  EXPECT_NEAR(kernel_seconds(layernorm, d), 4e-3 + 4e-6, 1e-12);
  const DeviceModel h200 = device_model("h200");
  EXPECT_EQ(h200.tensor16_flops, 789e12);
  EXPECT_EQ(h200.bandwidth, 4.3e12);
  for (const auto& [kind, share] : h200.kind_efficiency) EXPECT_TRUE(share > 0 && share <= 1) << kind;
}

// Two streams: collectives start once the kernels before them are done and run beside the later
// ones; a join makes the kernels wait for them. Rows add each entry's own time.
TEST(CostModel, CollectivesOverlapTheKernelsQueuedAfterThemUntilAJoin) {
  DeviceModel d = device_model("h100");
  d.launch_seconds = 0;
  auto kernel = [&](double ms) {
    KernelCost k;
    k.op = "kernel";
    k.kind = "elementwise";
    k.read_bytes = ms * 1e-3 * d.bandwidth;
    return k;
  };
  KernelCost sum;
  sum.op = "allreduce (ring)";
  sum.kind = "communication";
  sum.collective = true;
  sum.link_bytes = 2e-3 * d.gpu_link;  // 2 ms over the link
  KernelCost join;
  join.op = join.kind = "join";
  join.join = true;
  // 1 ms, a sum (2 ms) beside 1.5 ms of kernels, a join: the kernels wait 0.5 ms; then 1 ms.
  const StepPrediction p = predict_step({kernel(1), sum, kernel(1.5), join, kernel(1)}, d);
  EXPECT_NEAR(p.seconds, 4.0e-3, 1e-12);
  EXPECT_NEAR(p.collective_seconds, 2.0e-3, 1e-12);
  EXPECT_NEAR(p.exposed_collective_seconds, 0.5e-3, 1e-12);
  // Wholly hidden: the kernels after it outlast it.
  const StepPrediction hidden = predict_step({sum, kernel(3), join}, d);
  EXPECT_NEAR(hidden.seconds, 3.0e-3, 1e-12);
  EXPECT_NEAR(hidden.exposed_collective_seconds, 0.0, 1e-12);
  // Two sums queue behind each other on the communicator's stream.
  const StepPrediction queued = predict_step({sum, sum, kernel(1), join}, d);
  EXPECT_NEAR(queued.seconds, 4.0e-3, 1e-12);
  double row_seconds = 0;
  for (const CostRow& r : p.by_op) row_seconds += r.seconds;
  EXPECT_NEAR(row_seconds, 5.5e-3, 1e-12) << "rows add each entry's own time";
  // A device without a known link between GPUs refuses collectives, naming it and the op.
  d.gpu_link = 0;
  try {
    predict_step({sum}, d);
    FAIL() << "a collective without a link bandwidth was predicted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no link bandwidth between GPUs is known for device 'h100' (allreduce (ring))"),
              std::string::npos)
        << e.what();
  }
}

TEST(CostModel, UnknownDevicesAndPrecisionsAreRefused) {
  try {
    device_model("v100");
    FAIL() << "v100 is not modelled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device 'v100' (known: h100, a100, h200)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_precision("int8"), Error);
  CostModelOptions tf32;
  tf32.precision = Precision::tf32;
  tf32.activations_16bit = true;
  try {
    CostModelOps ops(tf32);
    FAIL() << "16-bit activations need a 16-bit precision";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("16-bit activations need precision bf16 or fp16, not 'tf32'"), std::string::npos)
        << e.what();
  }
}

// cuDNN's fused attention on a packed batch of lengths 3 and 5 (2 heads of 4): the forward's
// kernels (table upload, seq_len, O memset, the fused kernel, O into ctx) and the backward's
// (table upload, dqkv memset, rowsum(dO·O), the fused kernel, dQ's conversion), FLOPs as
// FlashAttention counts them (4 L² d per head forward, 2.5x backward) at the published cuDNN
// rates on an H100; no rate is known for an A100, and fp32 activations are refused. With one
// length and dropout nothing is uploaded: the dropout seed is a kernel's (as CUDA graphs need).
TEST(CostModel, FusedAttentionRunsAtCudnnsPublishedRate) {
  CostModelOptions options;
  options.activations_16bit = true;
  options.fused_attention = true;
  CostModelOps ops(options);
  AttentionLayout layout;
  layout.seq_start = {0, 3, 8};
  const int heads = 2, head_dim = 4, H = heads * head_dim, T = 8;
  void* qkv = ops.alloc(T * 3 * H * 2);
  void* ctx = ops.alloc(T * H * 2);
  void* dqkv = ops.alloc(T * 3 * H * 2);
  auto* stats = static_cast<float*>(ops.alloc(ops.attention_saved_elems(2, 5, heads) * 2));
  auto* key_bias = static_cast<float*>(ops.alloc(T * sizeof(float)));
  EXPECT_EQ(ops.attention_saved_elems(2, 5, heads), 2 * heads * 5 * 2) << "fp32 statistics in 16-bit elements";
  DropoutSite site;
  ops.attention_fwd({Act(ctx, DType::bf16), Act(stats, DType::bf16), ConstAct(qkv, DType::bf16), key_bias, layout,
                     heads, head_dim, site});
  ops.attention_bwd({Act(dqkv, DType::bf16), ConstAct(ctx, DType::bf16), ConstAct(ctx, DType::bf16),
                     ConstAct(qkv, DType::bf16), ConstAct(stats, DType::bf16), layout, heads, head_dim, site});
  const std::vector<KernelCost>& k = ops.kernels();
  ASSERT_EQ(k.size(), 9u) << "cuDNN writes O into the 16-bit ctx: no copy";
  const double fwd_flops = 4.0 * (3 * 3 + 5 * 5) * head_dim * heads;
  EXPECT_EQ(k[0].kind, "host copy");
  EXPECT_EQ(k[0].host_bytes, 16.0 * 3);
  EXPECT_EQ(k[3].kind, "fused attention");
  EXPECT_EQ(k[3].unit, MathUnit::fused_attention_fwd);
  EXPECT_EQ(k[3].flops, fwd_flops);
  EXPECT_EQ(k[3].read_bytes, 2.0 * T * 3 * H);
  EXPECT_EQ(k[3].write_bytes, 2.0 * T * H + 4.0 * T * heads);
  EXPECT_EQ(k[7].unit, MathUnit::fused_attention_bwd);
  EXPECT_EQ(k[7].flops, 2.5 * fwd_flops);
  EXPECT_DOUBLE_EQ(k[3].attention_length, (3.0 * 3 + 5 * 5) / T) << "sum of L^2 over sum of L";
  EXPECT_DOUBLE_EQ(k[7].attention_length, k[3].attention_length);
  KernelCost big = k[3];
  big.flops = 335e9;  // one millisecond at cuDNN's forward rate
  big.graphed = true;
  EXPECT_NEAR(kernel_seconds(big, device_model("h100")), 1e-3, 1e-12);
  // The H200's rates were measured at lengths 128 and 512: below 128 the rate at 128, between
  // them a power law (at 256, the geometric mean of the two), above 512 the rate at 512.
  const DeviceModel h200 = device_model("h200");
  ASSERT_EQ(h200.fused_attention_by_length.size(), 2u);
  const DeviceModel::AttentionRates at128 = h200.fused_attention_by_length[0], at512 = h200.fused_attention_by_length[1];
  big.flops = 1e9;
  big.read_bytes = big.write_bytes = 0;
  for (auto [length, rate] : {std::pair{std::min(k[3].attention_length, 100.0), at128.fwd_flops},
                              std::pair{128.0, at128.fwd_flops}, std::pair{256.0, std::sqrt(at128.fwd_flops * at512.fwd_flops)},
                              std::pair{512.0, at512.fwd_flops}, std::pair{4096.0, at512.fwd_flops}}) {
    big.attention_length = length;
    EXPECT_NEAR(kernel_seconds(big, h200), 1e9 / rate, 1e-9 / rate) << "length " << length;
  }
  big.unit = MathUnit::fused_attention_bwd;
  big.attention_length = 256;
  EXPECT_NEAR(kernel_seconds(big, h200), 1e9 / std::sqrt(at128.bwd_flops * at512.bwd_flops), 1e-15);
  try {
    kernel_seconds(k[3], device_model("a100"));
    FAIL() << "no fused-attention rate is known for an A100";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no fused attention rate is known for device 'a100'"), std::string::npos)
        << e.what();
  }
  ops.reset();
  layout.seq_start = {0, 4, 8};
  site.p = 0.1f;
  ops.attention_fwd({Act(ctx, DType::bf16), Act(stats, DType::bf16), ConstAct(qkv, DType::bf16), key_bias, layout,
                     heads, head_dim, site});
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(k[0].kind, "fused attention");
  EXPECT_EQ(k[0].write_bytes, 16.0) << "the dropout seed and offset";
  EXPECT_EQ(k[1].read_bytes, 4.0 * T) << "key counts from the key mask alone";
  for (const KernelCost& each : k) EXPECT_NE(each.kind, "host copy");
  options.activations_16bit = false;
  EXPECT_THROW(CostModelOps fp32_activations(options), Error);
  for (void* p : {qkv, ctx, dqkv, static_cast<void*>(stats), static_cast<void*>(key_bias)}) ops.release(p);
}

}  // namespace
}  // namespace bert
