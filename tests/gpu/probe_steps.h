// The op steps of gpu_probe (the first program of a GPU session): one kernel, one GEMM in each
// precision, cuDNN's fused attention forward and backward (uniform, ragged and with dropout, next
// to the reference attention), and one CUDA graph recorded and replayed, each through the engine's
// Ops on device 0 and reported as a line of its own, so a run cut short still says which step
// failed. Also run on the emulated device (emulated_probe_steps; the fused attention is not
// emulated there).
#pragma once

#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace bert::probe {

struct Line {
  std::string step;
  bool ok = false;
  std::string detail;  // what was measured, or the error
  double ms = 0;
};

inline Line run_step(const std::string& step, const std::function<std::string()>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  Line line{step};
  try {
    line.detail = body();
    line.ok = true;
  } catch (const std::exception& e) {
    line.detail = e.what();
  }
  line.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return line;
}

inline std::vector<float> pattern(int64_t n, float scale, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(((i * 7919 + seed * 104729) % 2001) - 1000) / 1000.0f;
  return v;
}

// Device buffers of one backend, released with it.
struct Buffers {
  Ops& ops;
  std::vector<void*> live;
  explicit Buffers(Ops& o) : ops(o) {}
  ~Buffers() {
    for (void* p : live) ops.release(p);
  }
  float* upload(const std::vector<float>& host) {
    auto* p = static_cast<float*>(ops.alloc(host.size() * sizeof(float)));
    live.push_back(p);
    ops.upload(p, host.data(), host.size() * sizeof(float));
    return p;
  }
  std::vector<float> download(const float* p, int64_t n) {
    std::vector<float> host(n);
    ops.download(host.data(), p, n * sizeof(float));
    return host;
  }
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

inline std::string kernel_step() {
  auto ops = make_cuda_ops(0, CudaOptions{Precision::fp32});
  Buffers b(*ops);
  const int64_t n = 4099;
  const std::vector<float> x = pattern(n, 1.0f, 1);
  float* d = b.upload(x);
  ops->scale(d, 2.0f, n);
  const std::vector<float> y = b.download(d, n);
  for (int64_t i = 0; i < n; ++i) require(y[i] == 2.0f * x[i], "scale: element " + std::to_string(i) + " wrong");
  return "scale of 4099 floats exact";
}

// out [M, N] = in [M, K] · W [N, K]^T + b against double sums; `bound` on the largest difference.
inline std::string gemm_step(Precision precision, double bound) {
  auto ops = make_cuda_ops(0, CudaOptions{precision});
  Buffers b(*ops);
  const int M = 128, K = 256, N = 192;
  const auto in = pattern(M * K, 1.0f, 2), W = pattern(N * K, 0.1f, 3), bias = pattern(N, 0.5f, 4);
  float* out = b.upload(std::vector<float>(M * N, 0.0f));
  ops->linear_fwd({out, Act(), b.upload(in), b.upload(W), b.upload(bias), M, K, N, Activation::none});
  const std::vector<float> got = b.download(out, M * N);
  double worst = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = bias[j];
      for (int k = 0; k < K; ++k) acc += double(in[i * K + k]) * W[j * K + k];
      worst = std::fmax(worst, std::fabs(acc - got[i * N + j]));
    }
  require(worst <= bound, "largest difference " + std::to_string(worst) + " above " + std::to_string(bound));
  return "128x256x192 with bias, largest difference to double " + std::to_string(worst);
}

// Fused attention forward and backward on `layout` (2 heads of 64) next to the reference
// attention's (bf16 both); with dropout the masks differ, so only finiteness is checked.
inline std::string fused_attention_step(const AttentionLayout& layout, float p) {
  const int heads = 2, D = 64, H = heads * D;
  const int64_t T = layout.total_tokens();
  std::vector<std::vector<float>> results;
  for (bool fused : {true, false}) {
    CudaOptions options{Precision::bf16};
    options.fused_attention = fused;
    auto ops = make_cuda_ops(0, options);
    Buffers b(*ops);
    const int64_t probs = ops->attention_saved_elems(layout.num_seqs(), layout.max_len(), heads);
    float* ctx = b.upload(std::vector<float>(T * H, 0.0f));
    float* saved = b.upload(std::vector<float>(probs, 0.0f));
    float* qkv = b.upload(pattern(T * 3 * H, 1.0f, 5));
    float* key_bias = b.upload(std::vector<float>(T, 0.0f));
    float* dqkv = b.upload(std::vector<float>(T * 3 * H, 0.0f));
    const DropoutSite site{1234, 1, 3, p};
    ops->attention_fwd({ctx, saved, qkv, key_bias, layout, heads, D, site});
    ops->attention_bwd({dqkv, b.upload(pattern(T * H, 1.0f, 6)), ctx, qkv, saved, layout, heads, D, site});
    std::vector<float> all = b.download(ctx, T * H);
    const std::vector<float> d = b.download(dqkv, T * 3 * H);
    all.insert(all.end(), d.begin(), d.end());
    for (float v : all) require(std::isfinite(v), std::string(fused ? "fused" : "reference") + ": a non-finite output");
    results.push_back(std::move(all));
  }
  if (p > 0.0f) return "outputs finite (dropout: cuDNN's masks are its own)";
  double worst = 0;
  for (size_t i = 0; i < results[0].size(); ++i) worst = std::fmax(worst, std::fabs(results[0][i] - results[1][i]));
  require(worst < 0.1, "fused and reference attention differ by " + std::to_string(worst));
  return "ctx and dqkv within " + std::to_string(worst) + " of the reference attention";
}

// A scale recorded as a CUDA graph after a direct run, replayed twice: 4 times the input.
inline std::string graph_step() {
  auto ops = make_cuda_ops(0, CudaOptions{Precision::bf16});
  Buffers b(*ops);
  const int64_t n = 1024;
  const std::vector<float> x = pattern(n, 1.0f, 7);
  float* d = b.upload(x);
  const auto body = [&] { ops->scale(d, 2.0f, n); };
  body();
  ops->upload(d, x.data(), n * sizeof(float));
  std::unique_ptr<RecordedWork> graph = ops->record(body);
  require(graph != nullptr, "the backend recorded nothing");
  require(graph->replay() && graph->replay(), "a replay was refused");
  const std::vector<float> y = b.download(d, n);
  for (int64_t i = 0; i < n; ++i) require(y[i] == 4.0f * x[i], "element " + std::to_string(i) + " wrong after replays");
  return "recorded, replayed twice, values right";
}

inline std::vector<Line> op_steps(bool with_fused_attention) {
  std::vector<Line> lines;
  lines.push_back(run_step("kernel", kernel_step));
  for (const auto& [precision, bound] : {std::pair{Precision::fp32, 1e-3}, {Precision::tf32, 0.1},
                                         {Precision::bf16, 0.5}, {Precision::fp16, 0.1}})
    lines.push_back(run_step(std::string("gemm ") + precision_name(precision), [p = precision, bound = bound] {
      return gemm_step(p, bound);
    }));
  if (with_fused_attention) {
    AttentionLayout uniform, ragged;
    uniform.seq_start = {0, 128, 256};
    ragged.seq_start = {0, 100, 256, 257};
    lines.push_back(run_step("fused attention uniform", [&] { return fused_attention_step(uniform, 0.0f); }));
    lines.push_back(run_step("fused attention ragged", [&] { return fused_attention_step(ragged, 0.0f); }));
    lines.push_back(run_step("fused attention dropout", [&] { return fused_attention_step(ragged, 0.1f); }));
  }
  lines.push_back(run_step("cuda graph", graph_step));
  return lines;
}

}  // namespace bert::probe
