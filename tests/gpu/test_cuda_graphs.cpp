// Stream capture and graph replay of CudaOps work, the ground CUDA graphs (issue #14) stand on:
// a bf16 encoder layer's ops (GEMMs with bias and GELU epilogues, the casts, packed attention
// with dropout and its sequence table, both directions, dropout + residual, LayerNorm) captured
// on the backend's stream after one direct run (so no scratch buffer grows and no table is
// uploaded while capturing). Capturing writes nothing; each graph launch equals the same ops run
// directly, bitwise, also after new input values are uploaded (a graph reads memory when it
// runs). Waiting for the stream while it captures fails and invalidates the capture; a refused
// recording names the config switch that runs without graphs, and an unjoined forked stream. On a GPU
// and under the emulation (emulated_cuda_graphs), whose runtime records and replays the work.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "../expect_error.h"
#include "core/error.h"
#include "gpu_random.h"

namespace bert {
namespace {

using testing::randn;

constexpr int kHeads = 4, kHeadDim = 16, kHidden = kHeads * kHeadDim, kInter = 4 * kHidden;

class CudaGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    ops = make_cuda_ops(0, CudaOptions{Precision::bf16});
    stream = static_cast<cudaStream_t>(ops->native_stream());
    layout.seq_start = {0, 7, 40, 41, 60};  // packed: the softmax reads its sequence table
    T = layout.total_tokens();
    x = input(T * kHidden, 1);
    w_qkv = input(kHidden * 3 * kHidden, 2, 0.1f);
    b_qkv = input(3 * kHidden, 3);
    w1 = input(kHidden * kInter, 4, 0.1f);
    b1 = input(kInter, 5);
    w2 = input(kInter * kHidden, 6, 0.1f);
    b2 = input(kHidden, 7);
    gamma = input(kHidden, 8);
    beta = input(kHidden, 9);
    dctx = input(T * kHidden, 10);
    std::vector<float> bias(T, 0.0f);
    bias[39] = -10000.0f;  // a padded last key
    key_bias = upload(bias);
    const int64_t probs_elems = layout.probs_elems(kHeads);
    for (auto [buffer, n] : {std::pair{&qkv, T * 3 * kHidden}, {&ctx, T * kHidden}, {&probs, probs_elems},
                             {&inter, T * kInter}, {&pre, T * kInter}, {&out, T * kHidden},
                             {&res, T * kHidden}, {&y, T * kHidden}, {&mean, T}, {&rstd, T},
                             {&dqkv, T * 3 * kHidden}}) {
      *buffer = static_cast<float*>(ops->alloc(n * sizeof(float)));
      outputs.push_back({*buffer, n});
    }
  }

  float* upload(const std::vector<float>& v) {
    auto* p = static_cast<float*>(ops->alloc(v.size() * sizeof(float)));
    ops->upload(p, v.data(), v.size() * sizeof(float));
    return p;
  }
  float* input(int64_t n, uint32_t seed, float stddev = 1.0f) { return upload(randn(n, seed, stddev)); }

  // The layer: forward, then attention's backward from dctx.
  void run_layer() {
    const DropoutSite attention{11, 5, 1, 0.1f}, hidden{11, 5, 2, 0.1f};
    ops->linear_fwd({qkv, nullptr, x, w_qkv, b_qkv, T, kHidden, 3 * kHidden, Activation::none});
    ops->attention_fwd({ctx, probs, qkv, key_bias, layout, kHeads, kHeadDim, attention});
    ops->linear_fwd({inter, pre, ctx, w1, b1, T, kHidden, kInter, Activation::gelu_tanh});
    ops->linear_fwd({out, nullptr, inter, w2, b2, T, kInter, kHidden, Activation::none});
    ops->dropout_residual_fwd({res, out, x, T * kHidden, hidden});
    ops->layernorm_fwd({y, mean, rstd, res, gamma, beta, T, kHidden, 1e-12f});
    ops->attention_bwd({dqkv, dctx, ctx, qkv, probs, layout, kHeads, kHeadDim, attention});
  }

  // Every output's bytes, in order.
  std::vector<std::vector<char>> read_outputs() {
    std::vector<std::vector<char>> all;
    for (const auto& [p, n] : outputs) {
      all.emplace_back(n * sizeof(float));
      ops->download(all.back().data(), p, all.back().size());
    }
    return all;
  }
  void clear_outputs() {
    for (const auto& [p, n] : outputs) ops->fill_zero(p, n * sizeof(float));
    ops->synchronize();
  }

  std::unique_ptr<Ops> ops;
  cudaStream_t stream = nullptr;
  AttentionLayout layout;
  int64_t T = 0;
  float *x, *w_qkv, *b_qkv, *w1, *b1, *w2, *b2, *gamma, *beta, *dctx, *key_bias;
  float *qkv, *ctx, *probs, *inter, *pre, *out, *res, *y, *mean, *rstd, *dqkv;
  std::vector<std::pair<float*, int64_t>> outputs;
};

TEST_F(CudaGraphs, ReplayEqualsTheDirectRunBitwise) {
  run_layer();  // scratch grows, the sequence table is uploaded
  const auto direct = read_outputs();
  clear_outputs();

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  run_layer();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  const auto captured = read_outputs();
  for (size_t i = 0; i < captured.size(); ++i) {
    const std::vector<char> zeros(captured[i].size(), 0);
    EXPECT_EQ(captured[i], zeros) << "output " << i << " was written while capturing";
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  const auto replayed = read_outputs();
  for (size_t i = 0; i < direct.size(); ++i) EXPECT_EQ(replayed[i], direct[i]) << "output " << i;

  // New input values: the graph reads them when it runs.
  const std::vector<float> x2 = randn(T * kHidden, 21);
  ops->upload(x, x2.data(), x2.size() * sizeof(float));
  run_layer();
  const auto direct2 = read_outputs();
  EXPECT_NE(direct2[0], direct[0]) << "the new input changed nothing";
  clear_outputs();
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  const auto replayed2 = read_outputs();
  for (size_t i = 0; i < direct2.size(); ++i) EXPECT_EQ(replayed2[i], direct2[i]) << "output " << i;

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(CudaGraphs, WaitingWhileCapturingInvalidatesTheCapture) {
  run_layer();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  run_layer();
  EXPECT_THROW(ops->synchronize(), Error);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  (void)cudaGetLastError();  // a GPU runtime keeps the failed calls' error until read
  run_layer();  // the stream works directly again
  ops->synchronize();
}

// A recording the runtime refuses (here an allocation inside it) fails naming the config switch
// that runs the step without graphs, and the stream works directly again.
TEST_F(CudaGraphs, ARefusedRecordingFailsNamingTheConfigSwitch) {
  run_layer();
  testing::expect_error(
      [&] {
        ops->record([&] {
          run_layer();
          void* extra = nullptr;
          (void)cudaMalloc(&extra, 256);  // refused while the stream captures: invalidates the capture
        });
      },
      Code::backend, {"recording the work as a CUDA graph failed", "config key 'train.cuda_graphs' = false"});
  (void)cudaGetLastError();
  run_layer();
  ops->synchronize();
}

// A recording that forks a second stream through an event and never joins it back fails naming
// the unjoined stream (not an allocation or a wait), and the stream works directly again.
TEST_F(CudaGraphs, ARecordingWithAnUnjoinedForkFailsNamingIt) {
  run_layer();
  cudaStream_t side = nullptr;
  cudaEvent_t forked = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), cudaSuccess);
  void* scratch = ops->alloc(256);
  testing::expect_error(
      [&] {
        ops->record([&] {
          run_layer();
          ASSERT_EQ(cudaEventRecord(forked, stream), cudaSuccess);
          ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
          ASSERT_EQ(cudaMemsetAsync(scratch, 0, 256, side), cudaSuccess);  // no event back to `stream`
        });
      },
      Code::backend, {"recording the work as a CUDA graph failed",
                      "a stream that joined the recording through an event was not joined back",
                      "config key 'train.cuda_graphs' = false"});
  (void)cudaGetLastError();
  run_layer();
  ops->synchronize();
  ops->release(scratch);
  EXPECT_EQ(cudaEventDestroy(forked), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
}

// Recording work that differs from the direct run before it is refused by name where it would miss
// a cache or grow a buffer, instead of querying cuBLASLt or allocating inside the capture: a GEMM
// of a shape not run before (fewer rows: no buffer grows), then a larger one (its 16-bit operand
// copy would grow). The stream works directly again after each.
TEST_F(CudaGraphs, RecordingRefusesCacheMissesAndGrowingBuffers) {
  run_layer();
  testing::expect_error(
      [&] { ops->record([&] { ops->linear_fwd({out, nullptr, inter, w2, b2, T - 1, kInter, kHidden, Activation::none}); }); },
      Code::internal, {"a cuBLASLt algorithm query for a GEMM shape not run before (m=" + std::to_string(T - 1) +
                           " n=" + std::to_string(kHidden) + " k=" + std::to_string(kInter) + " batch=1)",
                       "while recording a CUDA graph: the recorded work must repeat work run directly just before it"});
  run_layer();
  float* big = input(2 * T * kInter, 30);
  auto* big_out = static_cast<float*>(ops->alloc(2 * T * kHidden * sizeof(float)));
  testing::expect_error(
      [&] { ops->record([&] { ops->linear_fwd({big_out, nullptr, big, w2, b2, 2 * T, kInter, kHidden, Activation::none}); }); },
      Code::internal, {"a scratch buffer growing from", "while recording a CUDA graph"});
  run_layer();
  ops->synchronize();
}

}  // namespace
}  // namespace bert
