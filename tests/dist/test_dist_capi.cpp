// The distributed parts of the C API without a launcher: bad bert_dist values, the dist config
// section, NCCL in a build without it, and a one-rank MPI world (MPI initialised by the library
// as a singleton, finalised by it at exit).
#include <gtest/gtest.h>

#include <string>

#include "bert.h"

namespace {

const char* kTiny = R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 32}, "train": {"micro_batch": 2, "threads": 1},
    "data": {"max_seq_length": 16, "max_predictions_per_seq": 3})";

std::string with(const std::string& tail) { return std::string(kTiny) + tail + "}"; }

bert_status create(const std::string& config, const bert_dist* d) {
  bert_session* s = nullptr;
  const bert_status st = bert_session_create(config.c_str(), d, &s);
  bert_session_destroy(s);
  return st;
}

TEST(DistCapi, DistConfigKeysAreValidated) {
  EXPECT_EQ(create(with(R"(, "dist": {"timeout_s": 0})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("dist.timeout_s"), std::string::npos) << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"timeout": 5})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("dist.timeout"), std::string::npos) << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"timeout_s": 5, "clip_per_rank": true})"), nullptr), BERT_OK) << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"bucket_mb": -1})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("dist.bucket_mb"), std::string::npos) << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"wire_precision": "fp8"})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("dist.wire_precision"), std::string::npos) << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"bucket_mb": 0.5, "wire_precision": "bf16"})"), nullptr), BERT_OK)
      << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"shard_optimizer": true, "wire_precision": "bf16"})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("'dist.shard_optimizer' = true reduce-scatters gradients in fp32"),
            std::string::npos)
      << bert_last_error();
  EXPECT_EQ(create(with(R"(, "dist": {"shard_optimizer": 1})"), nullptr), BERT_ERR_CONFIG);
  EXPECT_EQ(create(with(R"(, "dist": {"shard_optimizer": true})"), nullptr), BERT_OK) << bert_last_error();
}

TEST(DistCapi, ResolvedConfigShowsTheDistSection) {
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(with(R"(, "dist": {"timeout_s": 7.5})").c_str(), nullptr, &s), BERT_OK);
  EXPECT_NE(std::string(bert_session_config(s))
                .find(R"("dist":{"bucket_mb":25.0,"clip_per_rank":false,"shard_optimizer":false,"timeout_s":7.5,"wire_precision":"fp32"})"),
            std::string::npos)
      << bert_session_config(s);
  bert_session_destroy(s);
}

TEST(DistCapi, BadDistValuesAreRejected) {
  bert_dist d;
  bert_dist_init(&d);
  d.backend = static_cast<bert_dist_backend>(42);
  EXPECT_EQ(create(with(""), &d), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("bert_dist.backend = 42"), std::string::npos) << bert_last_error();

  bert_dist_init(&d);
  d.rank = 5;
  d.world_size = 4;
  EXPECT_EQ(create(with(""), &d), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("rank 5 is outside world size 4"), std::string::npos)
      << bert_last_error();

  bert_dist_init(&d);
  d.backend = BERT_DIST_LOCAL;
  d.world_size = 2;
  EXPECT_EQ(create(with(""), &d), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("backend local runs one rank"), std::string::npos) << bert_last_error();

  bert_dist_init(&d);
  d.struct_size = 8;
  EXPECT_EQ(create(with(""), &d), BERT_ERR_INVALID_ARGUMENT);
}

TEST(DistCapi, NcclUniqueIdNeedsNccl) {
  unsigned char id[128] = {0};
  EXPECT_EQ(bert_dist_unique_id(nullptr), BERT_ERR_INVALID_ARGUMENT);
#ifdef BERT_TEST_HAVE_NCCL
  EXPECT_EQ(bert_dist_unique_id(id), BERT_OK) << bert_last_error();
#else
  EXPECT_EQ(bert_dist_unique_id(id), BERT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(bert_last_error()).find("without CUDA"), std::string::npos) << bert_last_error();
  bert_dist d;
  bert_dist_init(&d);
  d.backend = BERT_DIST_NCCL;
  EXPECT_EQ(create(with(""), &d), BERT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(bert_last_error()).find("backend nccl (world size 1 from default) is not built"),
            std::string::npos)
      << bert_last_error();
#endif
}

#ifdef BERT_TEST_HAVE_MPI
TEST(DistCapi, OneRankMpiWorldTrainsLikeLocal) {
  bert_dist d;
  bert_dist_init(&d);
  d.backend = BERT_DIST_MPI;
  bert_session* mpi = nullptr;
  bert_session* local = nullptr;
  ASSERT_EQ(bert_session_create(with("").c_str(), &d, &mpi), BERT_OK) << bert_last_error();
  d.backend = BERT_DIST_LOCAL;
  ASSERT_EQ(bert_session_create(with("").c_str(), &d, &local), BERT_OK) << bert_last_error();
  bert_step_result a, b;
  bert_step_result_init(&a);
  bert_step_result_init(&b);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(bert_step(mpi, nullptr, &a), BERT_OK) << bert_last_error();
    ASSERT_EQ(bert_step(local, nullptr, &b), BERT_OK) << bert_last_error();
    EXPECT_EQ(a.loss, b.loss) << "step " << i + 1;
  }
  float x[2] = {3, 4};
  ASSERT_EQ(bert_allreduce_host(mpi, x, 2, BERT_REDUCE_MEAN), BERT_OK);
  EXPECT_EQ(x[0], 3);
  EXPECT_EQ(x[1], 4);
  bert_session_destroy(mpi);
  bert_session_destroy(local);
}
#endif

}  // namespace
