// Builds without cudnn-frontend: asking for fused attention reports how to enable it.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/fused_attention.h"
#include "core/error.h"

namespace bert {

bool fused_attention_built() { return false; }

std::unique_ptr<FusedAttention> make_fused_attention(DeviceMemory&, cudaStream_t,
                                                     kernels::LowPrecision, const FusedAttentionOptions&) {
  fail(Code::unsupported,
       "config key 'train.fused_attention' = true: this build of bertengine has no cuDNN fused "
       "attention; install the cudnn-frontend headers (pip install nvidia-cudnn-frontend) and "
       "reconfigure with meson option -Dcudnn_frontend=<dir holding cudnn_frontend.h> (empty: "
       "found from the pip package), or set train.fused_attention to false");
}

}  // namespace bert
