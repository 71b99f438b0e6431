// describe_sdpa_graph: see sdpa_graph.h.
// GCC 12 reports a memset of impossible size inside cudnn-frontend's ReshapeNode (not used here)
// when this translation unit inlines the frontend's graph code: a false positive of its flow
// analysis, silenced for this file only.
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#include "backend/cuda/sdpa_graph.h"

#include <cmath>

namespace bert {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

std::shared_ptr<fe::graph::Graph> describe_sdpa_graph(bool backward, const SdpaShape& s, float p, bool deterministic,
                                                      kernels::LowPrecision io, int sm_version) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io == kernels::LowPrecision::fp16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_version > 0) g->set_sm_version(sm_version);
  const int64_t H = s.h * s.D;
  auto index_tensor = [&](const char* name, int64_t uid, int64_t n, fe::DataType_t type) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({n, 1, 1, 1})
                         .set_stride({1, 1, 1, 1})
                         .set_data_type(type));
  };
  // Ragged offsets (elements) of each sequence's first token in a tensor; null when batched.
  auto ragged = [&](const char* name, int64_t uid) -> TensorPtr {
    return s.ragged ? index_tensor(name, uid, s.B + 1, fe::DataType_t::INT32) : nullptr;
  };
  const TensorPtr off_q = ragged("off_q", kOffQ), off_k = ragged("off_k", kOffK),
                  off_v = ragged("off_v", kOffV), off_o = ragged("off_o", kOffO),
                  off_stats = ragged("off_stats", kOffStats);
  // [B, h, S, D] views: token stride 3H inside qkv (H inside O), head stride D.
  auto qkv_dims = [&](fe::graph::Tensor_attributes& t, const TensorPtr& off) -> auto& {
    t.set_dim({s.B, s.h, s.S, s.D}).set_stride({s.S * 3 * H, s.D, 3 * H, 1});
    if (off) t.set_ragged_offset(off);
    return t;
  };
  auto o_dims = [&](fe::graph::Tensor_attributes& t) -> auto& {
    t.set_dim({s.B, s.h, s.S, s.D}).set_stride({s.S * H, s.D, H, 1});
    if (off_o) t.set_ragged_offset(off_o);
    return t;
  };
  // Stats [B, h, S, 1] fp32: token-major [T, h] when ragged, else head-major per sequence.
  auto stats_dims = [&](fe::graph::Tensor_attributes& t) -> auto& {
    t.set_dim({s.B, s.h, s.S, 1}).set_data_type(fe::DataType_t::FLOAT);
    if (off_stats) {
      t.set_stride({s.S * s.h, 1, s.h, 1}).set_ragged_offset(off_stats);
    } else {
      t.set_stride({s.h * s.S, s.S, 1, 1});
    }
    return t;
  };
  auto input = [&](const char* name, int64_t uid) {
    fe::graph::Tensor_attributes t;
    t.set_name(name).set_uid(uid);
    return t;
  };
  auto q_attr = input("Q", kQ), k_attr = input("K", kK), v_attr = input("V", kV);
  const TensorPtr Q = g->tensor(qkv_dims(q_attr, off_q));
  const TensorPtr K = g->tensor(qkv_dims(k_attr, off_k));
  const TensorPtr V = g->tensor(qkv_dims(v_attr, off_v));
  const TensorPtr seq_q = index_tensor("seq_q", kSeqLenQ, s.B, fe::DataType_t::INT32);
  const TensorPtr seq_kv = index_tensor("seq_kv", kSeqLenKV, s.B, fe::DataType_t::INT32);
  const TensorPtr seed = p > 0.0f ? index_tensor("seed", kSeed, 1, fe::DataType_t::INT64) : nullptr;
  const TensorPtr offset =
      p > 0.0f ? index_tensor("offset", kOffset, 1, fe::DataType_t::INT64) : nullptr;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  if (!backward) {
    auto attr = fe::graph::SDPA_attributes()
                    .set_name("bert_sdpa_fwd")
                    .set_implementation(fe::AttentionImplementation_t::COMPOSITE)
                    .set_generate_stats(true)
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv);
    if (p > 0.0f) attr.set_dropout(p, seed, offset);
    auto [O, Stats] = g->sdpa(Q, K, V, attr);
    o_dims(O->set_output(true).set_uid(kO));
    stats_dims(Stats->set_output(true).set_uid(kStats));
  } else {
    auto o_attr = input("O", kO), do_attr = input("dO", kDO), stats_attr = input("Stats", kStats);
    const TensorPtr O = g->tensor(o_dims(o_attr));
    const TensorPtr dO = g->tensor(o_dims(do_attr));
    const TensorPtr Stats = g->tensor(stats_dims(stats_attr));
    auto attr = fe::graph::SDPA_backward_attributes()
                    .set_name("bert_sdpa_bwd")
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv)
                    .set_deterministic_algorithm(deterministic);
    if (p > 0.0f) attr.set_dropout(p, seed, offset);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, attr);
    qkv_dims(dQ->set_output(true).set_uid(kDQ), off_q);
    qkv_dims(dK->set_output(true).set_uid(kDK), off_k);
    qkv_dims(dV->set_output(true).set_uid(kDV), off_v);
  }
  return g;
}

}  // namespace bert
