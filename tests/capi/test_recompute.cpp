// Activation recomputation through the C ABI: recomputing the GELU output and the attention
// probabilities in backward (with dropout on, so the recomputed masks must match) trains
// bit-identically to keeping them, and shrinks the activation arena by the bytes the
// engine's own accounting says they take.
#include <bert.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kLayers = 3, kHeads = 4, kHidden = 32, kInter = 64, kSeq = 32, kMicro = 4;

std::string config(const std::string& train_extra) {
  return R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
      "intermediate_size": 64, "max_position_embeddings": 64},
      "train": {"micro_batch": 4, "steps": 20, "lr": 0.02, "threads": 1)" +
         train_extra + R"(}, "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})";
}

struct TrainedRun {
  std::vector<float> losses, weights;
  uint64_t activation_bytes = 0;
};

TrainedRun train(const std::string& extra) {
  TrainedRun run;
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(config(extra).c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  if (!s) return run;
  bert_step_result r;
  bert_step_result_init(&r);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(bert_step(s, nullptr, &r), BERT_OK) << bert_last_error();
    run.losses.push_back(r.loss);
  }
  run.weights.resize(kInter * kHidden);
  EXPECT_EQ(bert_param_read(s, "bert.encoder.layer.0.intermediate.dense.weight", run.weights.data(), run.weights.size()),
            BERT_OK);
  bert_memory_info m;
  bert_memory_info_init(&m);
  EXPECT_EQ(bert_session_memory(s, &m), BERT_OK);
  run.activation_bytes = m.activation_bytes;
  bert_session_destroy(s);
  return run;
}

// Each of the arena's buffers is rounded up to 64 bytes.
uint64_t padded(uint64_t floats) { return (floats * 4 + 63) / 64 * 64; }

TEST(Recompute, GeluAndAttentionRecomputationTrainBitIdentically) {
  const TrainedRun keep = train("");
  const TrainedRun gelu = train(R"(, "recompute_gelu": true)");
  const TrainedRun attn = train(R"(, "recompute_attention": true)");
  const TrainedRun both = train(R"(, "recompute_gelu": true, "recompute_attention": true)");
  for (const TrainedRun* r : {&gelu, &attn, &both}) {
    ASSERT_EQ(r->losses.size(), keep.losses.size());
    EXPECT_EQ(std::memcmp(r->losses.data(), keep.losses.data(), keep.losses.size() * sizeof(float)), 0);
    EXPECT_EQ(r->weights, keep.weights);
  }
  // One layer's GELU output [T, I] and attention probabilities [B, heads, S, S] are kept
  // instead of one per layer.
  const uint64_t inter = padded(uint64_t(kMicro) * kSeq * kInter);
  const uint64_t probs = padded(uint64_t(kMicro) * kHeads * kSeq * kSeq);
  EXPECT_EQ(keep.activation_bytes - gelu.activation_bytes, (kLayers - 1) * inter);
  EXPECT_EQ(keep.activation_bytes - attn.activation_bytes, (kLayers - 1) * probs);
  EXPECT_EQ(keep.activation_bytes - both.activation_bytes, (kLayers - 1) * (inter + probs));
}

}  // namespace
