// Training behaviour through the C ABI: determinism, loss falling, gradient accumulation,
// checkpoint round trip, parameter access, abort from another thread, logging, eval.
#include <bert.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "test_batch.h"

namespace {

bert_session* create(const std::string& config = kTinyConfig) {
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(config.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  return s;
}

std::vector<float> read(bert_session* s, const char* name, size_t n, bool grad = false) {
  std::vector<float> v(n);
  EXPECT_EQ(grad ? bert_grad_read(s, name, v.data(), n) : bert_param_read(s, name, v.data(), n), BERT_OK)
      << bert_last_error();
  return v;
}

TEST(Training, SameSeedGivesBitIdenticalLossesWithDropout) {
  std::vector<float> losses[2];
  for (auto& l : losses) {
    bert_session* s = create();
    bert_step_result r;
    bert_step_result_init(&r);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(bert_step(s, nullptr, &r), BERT_OK) << bert_last_error();
      l.push_back(r.loss);
    }
    bert_session_destroy(s);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::memcmp(&losses[0][i], &losses[1][i], sizeof(float)), 0) << "step " << i;
}

TEST(Training, LossFallsOnSyntheticData) {
  std::string config = kTinyConfig;
  config.replace(config.find("\"micro_batch\": 4"), 16, "\"micro_batch\": 16");
  bert_session* s = create(config);
  bert_step_result r;
  bert_step_result_init(&r);
  double first = 0, last = 0;
  for (int i = 0; i < 80; ++i) {
    ASSERT_EQ(bert_step(s, nullptr, &r), BERT_OK) << bert_last_error();
    if (i < 10) first += r.mlm_loss / 10;
    if (i >= 70) last += r.mlm_loss / 10;
    EXPECT_TRUE(std::isfinite(r.loss));
  }
  // The synthetic tokens have a skewed unigram distribution and local structure: an untrained
  // model sits near ln(100) = 4.6, a trained one must be clearly below.
  EXPECT_LT(last, first - 0.2) << "MLM loss did not fall: " << first << " -> " << last;
  EXPECT_EQ(r.step, 80);
  bert_session_destroy(s);
}

TEST(Training, StepOnHostBatchEqualsManualAccumulation) {
  const std::string config = R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
      "train": {"micro_batch": 2, "accumulation_steps": 2, "steps": 10, "threads": 1, "dropout": false},
      "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})";
  TestBatch t(4, 16, 3, 100);
  bert_session* a = create(config);
  bert_session* b = create(config);
  bert_batch whole = t.view();
  bert_step_result ra, rb;
  bert_step_result_init(&ra);
  bert_step_result_init(&rb);
  ASSERT_EQ(bert_step(a, &whole, &ra), BERT_OK) << bert_last_error();
  EXPECT_EQ(ra.micro_batches, 2);
  for (int half = 0; half < 2; ++half) {
    TestBatch part = t;
    bert_batch v = t.view();
    v.batch_size = 2;
    v.input_ids += half * 2 * 16;
    v.segment_ids += half * 2 * 16;
    v.input_mask += half * 2 * 16;
    v.masked_lm_positions += half * 2 * 3;
    v.masked_lm_ids += half * 2 * 3;
    v.next_sentence_labels += half * 2;
    ASSERT_EQ(bert_forward_backward(b, &v, nullptr), BERT_OK) << bert_last_error();
  }
  ASSERT_EQ(bert_allreduce(b), BERT_OK);
  ASSERT_EQ(bert_optimizer_step(b, &rb), BERT_OK) << bert_last_error();
  EXPECT_EQ(ra.loss, rb.loss);
  EXPECT_EQ(ra.grad_norm, rb.grad_norm);
  const char* name = "bert.encoder.layer.1.output.dense.weight";
  EXPECT_EQ(read(a, name, 32 * 64), read(b, name, 32 * 64));
  bert_session_destroy(a);
  bert_session_destroy(b);
}

TEST(Training, GradientsAccumulateAndResetAfterStep) {
  std::string config = kTinyConfig;
  config.replace(config.find("\"threads\": 1"), 12, "\"threads\": 1, \"dropout\": false");
  bert_session* s = create(config);
  TestBatch t(2, 16, 3, 100);
  bert_batch b = t.view();
  const char* name = "cls.seq_relationship.bias";
  ASSERT_EQ(bert_forward_backward(s, &b, nullptr), BERT_OK);
  std::vector<float> g1 = read(s, name, 2, true);
  ASSERT_EQ(bert_forward_backward(s, &b, nullptr), BERT_OK);
  std::vector<float> g2 = read(s, name, 2, true);
  EXPECT_NEAR(g2[0], 2 * g1[0], 1e-6);
  EXPECT_NE(g1[0], 0.0f);
  ASSERT_EQ(bert_optimizer_step(s, nullptr), BERT_OK);
  EXPECT_EQ(read(s, name, 2, true), std::vector<float>(2, 0.0f));
  bert_session_destroy(s);
}

TEST(Training, CheckpointRoundTrip) {
  bert_session* a = create();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(bert_step(a, nullptr, nullptr), BERT_OK);
  const std::string path = std::filesystem::temp_directory_path() / "bert_roundtrip.h5";
  ASSERT_EQ(bert_checkpoint(a, path.c_str()), BERT_OK) << bert_last_error();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(getpid())));
  bert_session* b = create(std::string(kTinyConfig).replace(std::string(kTinyConfig).find("\"lr\""), 4, "\"seed\": 7, \"lr\""));
  ASSERT_EQ(bert_checkpoint_load(b, path.c_str()), BERT_OK) << bert_last_error();
  size_t count = 0;
  ASSERT_EQ(bert_param_count(a, &count), BERT_OK);
  EXPECT_EQ(count, 5u + 2 * 16u + 2u + 7u);
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    int ndim = 0;
    int64_t shape[4];
    ASSERT_EQ(bert_param_info(a, i, &name, &ndim, shape), BERT_OK);
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    EXPECT_EQ(read(a, name, n), read(b, name, n)) << name;
  }
  TestBatch t(4, 16, 3, 100);
  bert_batch batch = t.view();
  bert_eval_result ea, eb;
  bert_eval_result_init(&ea);
  bert_eval_result_init(&eb);
  ASSERT_EQ(bert_eval(a, &batch, &ea), BERT_OK);
  ASSERT_EQ(bert_eval(b, &batch, &eb), BERT_OK);
  EXPECT_EQ(ea.mlm_loss, eb.mlm_loss);
  EXPECT_EQ(ea.nsp_accuracy, eb.nsp_accuracy);
  bert_session_destroy(a);
  bert_session_destroy(b);
  std::remove(path.c_str());
}

TEST(Training, ParameterNamesShapesAndWrite) {
  bert_session* s = create();
  const char* name = nullptr;
  int ndim = 0;
  int64_t shape[4];
  ASSERT_EQ(bert_param_info(s, 0, &name, &ndim, shape), BERT_OK);
  EXPECT_STREQ(name, "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(ndim, 2);
  EXPECT_EQ(shape[0], 100);  // the config's vocabulary, not the padded 104
  EXPECT_EQ(shape[1], 32);
  ASSERT_EQ(bert_param_info(s, 5, &name, &ndim, shape), BERT_OK);
  EXPECT_STREQ(name, "bert.encoder.layer.0.attention.self.query.weight");
  std::vector<float> w(100 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.001f * static_cast<float>(i % 97);
  ASSERT_EQ(bert_param_write(s, "bert.embeddings.word_embeddings.weight", w.data(), w.size()), BERT_OK);
  EXPECT_EQ(read(s, "bert.embeddings.word_embeddings.weight", w.size()), w);
  bert_session_destroy(s);
}

TEST(Training, EvalOnConfiguredDataReportsAccuracy) {
  bert_session* s = create();
  bert_eval_result e;
  bert_eval_result_init(&e);
  ASSERT_EQ(bert_eval(s, nullptr, &e), BERT_OK) << bert_last_error();
  EXPECT_EQ(e.sequences, 4 * 4);  // data.eval_batches (4) micro-batches of 4
  EXPECT_GT(e.masked_tokens, 0);
  EXPECT_NEAR(e.mlm_loss, std::log(100.0), 1.0);  // an untrained model is close to uniform
  EXPECT_LT(e.mlm_accuracy, 0.2);  // untrained: chance is 1 in 100
  // Each accuracy is a count of right answers over its total.
  const double mlm_right = e.mlm_accuracy * static_cast<double>(e.masked_tokens);
  const double nsp_right = e.nsp_accuracy * static_cast<double>(e.sequences);
  EXPECT_NEAR(mlm_right, std::round(mlm_right), 1e-6);
  EXPECT_NEAR(nsp_right, std::round(nsp_right), 1e-6);
  EXPECT_GE(nsp_right, 0.0);
  EXPECT_LE(nsp_right, static_cast<double>(e.sequences));
  // Every evaluation without a batch sees the same data: unchanged weights, identical result.
  bert_eval_result again;
  bert_eval_result_init(&again);
  ASSERT_EQ(bert_eval(s, nullptr, &again), BERT_OK) << bert_last_error();
  EXPECT_EQ(again.mlm_loss, e.mlm_loss);
  EXPECT_EQ(again.masked_tokens, e.masked_tokens);
  bert_session_destroy(s);
}

TEST(Training, AbortFromAnotherThread) {
  bert_session* s = create(R"({"model": "bert-mini", "train": {"micro_batch": 8, "threads": 1},
                              "data": {"max_seq_length": 128}})");
  std::atomic<bool> started{false};
  std::thread killer([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    bert_session_abort(s);
  });
  bert_status st = BERT_OK;
  started = true;
  for (int i = 0; i < 1000 && st == BERT_OK; ++i) st = bert_step(s, nullptr, nullptr);
  killer.join();
  EXPECT_EQ(st, BERT_ERR_ABORTED);
  EXPECT_NE(std::string(bert_last_error()).find("abort"), std::string::npos);
  // Aborted gradients are discarded and the session keeps working.
  std::vector<float> g(2);
  ASSERT_EQ(bert_grad_read(s, "cls.seq_relationship.bias", g.data(), 2), BERT_OK);
  EXPECT_EQ(g, std::vector<float>(2, 0.0f));
  EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
}

TEST(Training, PendingAbortAbortsTheNextCallUnlessCleared) {
  bert_session* s = create();
  bert_session_abort(s);  // no call in flight: the next one is aborted
  EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_ERR_ABORTED);
  EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_OK) << "an abort is consumed once: " << bert_last_error();
  bert_session_abort(s);
  bert_session_clear_abort(s);
  EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_OK) << bert_last_error();
  bert_session_clear_abort(nullptr);  // ignored, like bert_session_abort(NULL)
  bert_session_destroy(s);
}

TEST(Training, LogCallbackReceivesSessionInfo) {
  struct Seen {
    int count = 0;
    std::string text;
  } seen;
  bert_set_log_callback(
      [](bert_log_level, const char* message, void* user) {
        auto* s = static_cast<Seen*>(user);
        ++s->count;
        s->text += message;
      },
      &seen);
  bert_session* s = create();
  bert_set_log_callback(nullptr, nullptr);
  EXPECT_GT(seen.count, 0);
  EXPECT_NE(seen.text.find("arena"), std::string::npos) << seen.text;
  bert_session_destroy(s);
}

// The callback runs with no library lock held: it may replace itself and use the engine
// (a session created from inside it logs too, re-entering the callback).
TEST(Training, LogCallbackMayCallBackIntoTheLibrary) {
  struct Seen {
    int calls = 0;
    int nested_sessions = 0;
  } seen;
  bert_log_fn reenter = [](bert_log_level, const char*, void* user) {
    auto* s = static_cast<Seen*>(user);
    if (++s->calls == 1) {
      bert_session* inner = nullptr;
      if (bert_session_create(R"({"model": "bert-tiny", "data": {"max_seq_length": 16, "max_predictions_per_seq": 2}})",
                              nullptr, &inner) == BERT_OK) {
        ++s->nested_sessions;
        bert_session_destroy(inner);
      }
      bert_set_log_callback(nullptr, nullptr);  // replaces the sink while it is being called
    }
  };
  bert_set_log_callback(reenter, &seen);
  bert_session* s = create();
  bert_set_log_callback(nullptr, nullptr);
  EXPECT_EQ(seen.nested_sessions, 1);
  EXPECT_GE(seen.calls, 2) << "the nested session's log lines reach the callback too";
  bert_session_destroy(s);
}

// bert_session_config's text stays valid until the session is destroyed, also across a
// bert_checkpoint_load that changes the config.
TEST(Training, ConfigTextOutlivesCheckpointLoads) {
  bert_session* s = create();
  const char* first = bert_session_config(s);
  const std::string copy = first;
  const std::string path = testing::TempDir() + "config_lifetime.h5";
  ASSERT_EQ(bert_checkpoint(s, path.c_str()), BERT_OK) << bert_last_error();
  ASSERT_EQ(bert_checkpoint_load(s, path.c_str()), BERT_OK) << bert_last_error();
  const char* second = bert_session_config(s);
  EXPECT_EQ(std::string(first), copy);
  EXPECT_NE(std::string(second).find("\"model\""), std::string::npos);
  std::remove(path.c_str());
  bert_session_destroy(s);
}

TEST(Training, ResolvedConfigHasDefaults) {
  bert_session* s = create();
  std::string c = bert_session_config(s);
  EXPECT_NE(c.find("\"optimizer\":\"lamb\""), std::string::npos) << c;
  EXPECT_NE(c.find("\"max_grad_norm\":1.0"), std::string::npos) << c;
  bert_session_destroy(s);
}

}  // namespace

namespace {

// The largest gradient difference between two sessions after a forward_backward, relative to the
// largest gradient of the tensor, over all tensors (the attention key bias, zero up to rounding,
// left out); `worst_name` is the tensor where it is. a's gradients must not all be zero.
double worst_gradient_gap(bert_session* a, bert_session* b, std::string& worst_name) {
  size_t count = 0;
  bert_param_count(a, &count);
  double worst = 0, largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    int ndim = 0;
    int64_t shape[4];
    bert_param_info(a, i, &name, &ndim, shape);
    if (std::string(name).find("attention.self.key.bias") != std::string::npos) continue;
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    std::vector<float> ga = read(a, name, n, true), gb = read(b, name, n, true);
    double max_ref = 0, max_diff = 0;
    for (size_t j = 0; j < n; ++j) {
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(ga[j])));
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(ga[j] - gb[j])));
    }
    largest = std::max(largest, max_ref);
    const double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
    if (rel > worst) {
      worst = rel;
      worst_name = name;
    }
  }
  EXPECT_GT(largest, 0.0) << "no gradient to compare";
  return worst;
}

// Unpadded execution (data.unpad) and padding only to a multiple of 16 tokens
// (data.pad_to_multiple: 32 rows per sequence here instead of 48) must give the padded results
// within 1e-5 on the same samples.
TEST(Training, UnpaddedAndBinPaddedBatchesMatchPaddedWithin1e5) {
  const std::string base = R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
      "train": {"micro_batch": 4, "steps": 10, "threads": 1, "dropout": false},
      "data": {"max_seq_length": 48, "max_predictions_per_seq": 5, )";
  bert_session* padded = create(base + R"("unpad": false}})");
  const TestBatch t(4, 32, 5, 100, 42);  // real lengths vary between 16 and 32 ...
  TestBatch wide(4, 48, 5, 100, 42);     // ... and are copied into sequences of 48 positions
  for (int i = 0; i < 4; ++i) {
    for (int s = 0; s < 48; ++s) {
      wide.ids[i * 48 + s] = s < 32 ? t.ids[i * 32 + s] : 0;
      wide.seg[i * 48 + s] = s < 32 ? t.seg[i * 32 + s] : 0;
      wide.mask[i * 48 + s] = s < 32 ? t.mask[i * 32 + s] : 0;
    }
  }
  wide.pos = t.pos;
  wide.labels = t.labels;
  wide.nsp = t.nsp;
  const bert_batch b = wide.view();
  bert_step_result rp;
  bert_step_result_init(&rp);
  ASSERT_EQ(bert_forward_backward(padded, &b, &rp), BERT_OK) << bert_last_error();
  const std::string layouts[] = {R"("unpad": true}})", R"("unpad": false, "pad_to_multiple": 16}})"};
  for (const std::string& layout : layouts) {
    bert_session* other = create(base + layout);
    bert_step_result r;
    bert_step_result_init(&r);
    ASSERT_EQ(bert_forward_backward(other, &b, &r), BERT_OK) << bert_last_error();
    EXPECT_NEAR(rp.loss, r.loss, 1e-5 * std::fabs(rp.loss)) << layout;
    std::string worst_name;
    const double worst = worst_gradient_gap(padded, other, worst_name);
    EXPECT_LT(worst, 1e-5) << layout << " worst gradient: " << worst_name;
    std::printf("[ info ] %s: loss %.7f (padded %.7f), worst relative gradient gap %.3g (%s)\n", layout.c_str(), r.loss,
                rp.loss, worst, worst_name.c_str());
    bert_session_destroy(other);
  }
  bert_session_destroy(padded);
}

}  // namespace

namespace {

TEST(Training, MemoryAccountingCoversEveryBuffer) {
  bert_session* s = create();
  bert_memory_info m;
  bert_memory_info_init(&m);
  ASSERT_EQ(bert_session_memory(s, &m), BERT_OK) << bert_last_error();
  size_t count = 0, elems = 0;
  bert_param_count(s, &count);
  for (size_t i = 0; i < count; ++i) {
    int ndim = 0;
    int64_t shape[4];
    bert_param_info(s, i, nullptr, &ndim, shape);
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    elems += n;
  }
  EXPECT_GE(m.parameter_bytes, elems * sizeof(float));
  EXPECT_EQ(m.gradient_bytes, m.parameter_bytes);
  EXPECT_EQ(m.optimizer_bytes, 3 * m.parameter_bytes);
  EXPECT_GT(m.activation_bytes, 0u);
  EXPECT_GE(m.peak_device_bytes, m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes + m.activation_bytes);
  bert_session_destroy(s);
}

TEST(Training, RankOfASingleProcessSession) {
  bert_session* s = create();
  int rank = -1, world = -1, local = -1;
  ASSERT_EQ(bert_session_rank(s, &rank, &world, &local), BERT_OK) << bert_last_error();
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(world, 1);
  EXPECT_EQ(local, 0);
  EXPECT_EQ(bert_session_rank(s, nullptr, &world, nullptr), BERT_OK);
  EXPECT_EQ(bert_session_rank(nullptr, &rank, nullptr, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("session"), std::string::npos) << bert_last_error();
  bert_session_destroy(s);
}

}  // namespace
