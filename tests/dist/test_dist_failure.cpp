// A rank dies (or, with BERT_TEST_FAILURE=hang, stops answering) mid-run under mpirun: the last
// rank leaves before step 3, and every survivor's bert_step must return BERT_ERR_DISTRIBUTED
// naming the all-reduce and the lost rank within dist.timeout_s (plus a margin), then refuse further collectives
// at once and exit without hanging. MPI here is initialised by the library itself from the Open
// MPI environment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bert.h"
#include "dist_batches.h"

namespace {

constexpr double kTimeout = 3.0;

// The library initialised MPI here, so the host gives it back once every session is gone
// (after a failed collective bert_finalize leaves MPI alone and still returns BERT_OK).
class FinalizeLibrary : public ::testing::Environment {
 public:
  void TearDown() override { EXPECT_EQ(bert_finalize(), BERT_OK) << bert_last_error(); }
};
const ::testing::Environment* const finalize_library = ::testing::AddGlobalTestEnvironment(new FinalizeLibrary);

std::string failure_mode() {
  const char* mode = std::getenv("BERT_TEST_FAILURE");
  return mode ? mode : "exit";
}

// Runs first in every mode, on every rank: while a session uses the MPI the library initialised,
// bert_finalize refuses and says why; the session stays usable.
TEST(DistFailure, FinalizeIsRefusedWhileASessionUsesMpi) {
  const std::string config = R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}, "dist": {"timeout_s": 30}})";
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(config.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  EXPECT_EQ(bert_finalize(), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("bert_finalize: 1 session(s) still use MPI; destroy them first"),
            std::string::npos) << bert_last_error();
  float x = 1;
  EXPECT_EQ(bert_allreduce_host(s, &x, 1, BERT_REDUCE_SUM), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
}

TEST(DistFailure, SurvivorsReturnErrorWithinTimeout) {
  if (failure_mode() == "absent") GTEST_SKIP() << "BERT_TEST_FAILURE=absent runs the other test";
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* world_env = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_TRUE(rank_env && world_env) << "run this test under mpirun";
  const int rank = std::atoi(rank_env), world = std::atoi(world_env);
  ASSERT_GE(world, 2);
  const std::string config = R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32},
      "train": {"micro_batch": 2, "threads": 1, "dropout": false},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}, "dist": {"timeout_s": 3}})";
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(config.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  bert_step_result r;
  bert_step_result_init(&r);
  GlobalBatch g(2 * world, 16, 3, 64, 5);
  bert_batch b = g.view(2 * rank, 2);
  for (int step = 0; step < 2; ++step) ASSERT_EQ(bert_step(s, &b, &r), BERT_OK) << bert_last_error();
  if (rank == world - 1) {
    // BERT_TEST_FAILURE=hang: the rank stops answering (alive, silent) until the survivors
    // have given up; otherwise it dies without a word to its peers.
    if (failure_mode() == "hang") sleep(static_cast<unsigned>(kTimeout) + 3);
    _exit(0);
  }

  const auto t0 = std::chrono::steady_clock::now();
  const bert_status st = bert_step(s, &b, &r);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(st, BERT_ERR_DISTRIBUTED) << bert_status_string(st) << ": " << bert_last_error();
  const std::string msg = bert_last_error();
  EXPECT_NE(msg.find("allreduce_sum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(rank) + " of " + std::to_string(world)), std::string::npos) << msg;
  // The survivors time out together and hear each other's roll call: the lost rank alone is named.
  EXPECT_NE(msg.find("rank " + std::to_string(world - 1) + " did not answer a roll call"), std::string::npos) << msg;
  EXPECT_GE(waited, kTimeout * 0.9) << msg;
  EXPECT_LT(waited, kTimeout + 5.0) << msg;
  std::fprintf(stderr, "rank %d: BERT_ERR_DISTRIBUTED after %.2f s: %s\n", rank, waited, msg.c_str());

  // The communicator is unusable now: the next collective fails at once instead of waiting again.
  const auto t1 = std::chrono::steady_clock::now();
  float x = 1;
  EXPECT_EQ(bert_allreduce_host(s, &x, 1, BERT_REDUCE_SUM), BERT_ERR_DISTRIBUTED);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 0.5);
  EXPECT_NE(std::string(bert_last_error()).find("failed earlier"), std::string::npos) << bert_last_error();
  bert_session_destroy(s);
}

// BERT_TEST_FAILURE=absent: after a first session (MPI is up on every rank), the last rank never
// creates the second one; the others' bert_session_create must give up after dist.timeout_s.
// (A rank that never starts at all blocks MPI_Init itself, which no library can bound.)
TEST(DistFailure, SessionCreationWithoutAPeerTimesOut) {
  if (failure_mode() != "absent") GTEST_SKIP() << "runs with BERT_TEST_FAILURE=absent";
  const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")), world = std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
  const std::string config = R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}, "dist": {"timeout_s": 3}})";
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(config.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
  s = nullptr;
  if (rank == world - 1) {
    sleep(static_cast<unsigned>(kTimeout) + 3);
    _exit(0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(bert_session_create(config.c_str(), nullptr, &s), BERT_ERR_DISTRIBUTED) << bert_last_error();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s, nullptr);
  EXPECT_LT(waited, kTimeout + 5.0);
  EXPECT_NE(std::string(bert_last_error()).find("MPI communicator creation on rank " + std::to_string(rank)),
            std::string::npos)
      << bert_last_error();
  std::fprintf(stderr, "rank %d: BERT_ERR_DISTRIBUTED after %.2f s: %s\n", rank, waited, bert_last_error());
}

}  // namespace
