// cuDNN's rules for every SDPA graph the engine asks for, checked without a GPU: each graph
// described as the fused attention describes it (describe_sdpa_graph) and validated by
// cudnn-frontend for a target SM (set_sm_version: no device is queried) — forward and the
// deterministic backward, bf16 and fp16, dropout off and on, uniform batches on sm_80 and sm_90
// and ragged (variable-length) ones on sm_90 (elsewhere the engine runs them padded), at the
// shapes of the GPU suite (2 heads of 64, bounds 64 and 128), bert-tiny and BERT-base/large
// (12 and 16 heads of 64 at 128 and 512 tokens). The linked cuDNN's version is printed: the GPU
// machine's may differ, so this proves the graphs, not that machine's engines.
#include <cudnn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/sdpa_graph.h"

namespace bert {
namespace {

struct Request {
  int64_t B, S, h, D;
};

constexpr Request kRequests[] = {
    {3, 64, 2, 64},  {4, 128, 2, 64},  {8, 64, 2, 64},   // the GPU suite's layouts
    {8, 128, 2, 64},                                       // bert-tiny end to end
    {64, 128, 12, 64}, {16, 512, 12, 64},                  // BERT-base phases 1 and 2
    {64, 128, 16, 64}, {16, 512, 16, 64}, {8, 512, 16, 64},  // BERT-large
};

TEST(SdpaGraphs, EveryRequestedGraphValidatesForItsSm) {
  std::printf("cuDNN %zu (headers %d), cudnn-frontend %d\n", cudnnGetVersion(), CUDNN_VERSION, CUDNN_FRONTEND_VERSION);
  int checked = 0;
  for (int sm : {80, 90}) {
    for (const Request& r : kRequests) {
      for (bool ragged : {false, true}) {
        if (ragged && sm < 90) continue;  // sm_8x: variable lengths run through padded copies
        for (auto io : {kernels::LowPrecision::bf16, kernels::LowPrecision::fp16}) {
          for (float p : {0.0f, 0.1f}) {
            for (bool backward : {false, true}) {
              SdpaShape s;
              s.ragged = ragged;
              s.B = r.B;
              s.S = r.S;
              s.T = r.B * r.S;
              s.h = r.h;
              s.D = r.D;
              auto g = describe_sdpa_graph(backward, s, p, /*deterministic=*/true, io, sm);
              cudnn_frontend::error_t st = g->validate();
              EXPECT_TRUE(st.is_good()) << "sm_" << sm << (backward ? " backward" : " forward") << " B " << r.B
                                        << " S " << r.S << " heads " << r.h << " x " << r.D
                                        << (ragged ? " ragged" : "") << " p " << p
                                        << (io == kernels::LowPrecision::bf16 ? " bf16" : " fp16") << ": "
                                        << st.get_message();
              ++checked;
            }
          }
        }
      }
    }
  }
  std::printf("%d graphs validated\n", checked);
}

// The check checks: a head dimension cuDNN cannot take (not a multiple of 8) fails validation
// without a device too (the engine refuses it earlier, naming train.fused_attention).
TEST(SdpaGraphs, AGraphCudnnCannotRunFailsValidation) {
  SdpaShape s;
  s.B = 2, s.S = 64, s.T = 128, s.h = 2, s.D = 60;
  cudnn_frontend::error_t st = describe_sdpa_graph(false, s, 0.0f, true, kernels::LowPrecision::bf16, 90)->validate();
  EXPECT_FALSE(st.is_good());
  std::printf("head dim 60: %s\n", st.get_message().c_str());
}

}  // namespace
}  // namespace bert
