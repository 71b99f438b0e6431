// Bucketed gradient all-reduce: a recording communicator (one rank, so the sums are the
// identity) sees which ranges a training step starts and when. The buckets must tile the
// gradient buffer from the top down, each at least bucket_mb except the last, all started
// before the step waits; and every range must already hold its final gradient when its sum
// starts (checked by comparing a snapshot taken at the start with the buffer at the end),
// also with gradient accumulation, where only the last micro-batch may start buckets. Joined
// buckets (CUDA graphs): joined to the stream once the backward pass is done, waited for through
// the stream, and after a replay (which queued them again) never started a second time.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "session/gradient_sync.h"
#include "session/session.h"

namespace bert {
namespace {

struct StartedSum {
  float* data;
  int64_t n;
  std::vector<float> snapshot;
  bool before_finish;
};

struct Record {
  std::vector<StartedSum> sums;
  int finishes = 0, joins = 0, stream_waits = 0;
};

class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(Record* record) : record_(record) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "recording"; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_host(float*, int64_t, ReduceOp) override {}
  void broadcast(float*, int64_t) override {}
  void allreduce_sum_host(double*, int64_t) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void start_allreduce_sum(float* data, int64_t n, WirePrecision, void*) override {
    record_->sums.push_back({data, n, std::vector<float>(data, data + n), record_->finishes == 0});
  }
  void finish_allreduce_sums() override {
    ++record_->finishes;
    for (const StartedSum& s : record_->sums) {
      ASSERT_TRUE(std::equal(s.snapshot.begin(), s.snapshot.end(), s.data))
          << "the range of " << s.n << " elements changed after its sum started";
    }
  }
  void join_allreduce_sums(void*) override { ++record_->joins; }
  void wait_for_stream(void*) override { ++record_->stream_waits; }

 private:
  Record* record_;
};

SessionConfig tiny(double bucket_mb, int accumulation) {
  SessionConfig c = parse_session_config(R"({"model": {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 4,
      "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32},
      "train": {"micro_batch": 2, "threads": 1}, "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}})");
  c.dist.bucket_mb = bucket_mb;
  c.train.accumulation_steps = accumulation;
  return c;
}

void expect_tiling(const Record& r, float* grads, int64_t total, int64_t bucket_elems) {
  ASSERT_FALSE(r.sums.empty());
  int64_t top = total;
  for (size_t i = 0; i < r.sums.size(); ++i) {
    const StartedSum& s = r.sums[i];
    EXPECT_EQ(s.data + s.n, grads + top) << "bucket " << i << " does not continue the previous one";
    if (s.data != grads) {
      EXPECT_GE(s.n, bucket_elems) << "bucket " << i;
    }
    top -= s.n;
  }
  EXPECT_EQ(top, 0) << "the buckets do not cover the buffer";
}

TEST(GradientSync, BucketsTileTheBufferTopDownAndStartWithFinalGradients) {
  for (int accumulation : {1, 2}) {
    Record record;
    Session s(tiny(0.01, accumulation), std::make_unique<RecordingCommunicator>(&record));
    s.step(nullptr);
    const int64_t total = s.model().params().total_elems;
    expect_tiling(record, s.model().grad_data(), total, static_cast<int64_t>(0.01 * 1048576 / 4));
    EXPECT_GE(record.sums.size(), 4u) << "expected several buckets from a 4-layer model";
    EXPECT_EQ(record.finishes, 1);
    for (const StartedSum& sum : record.sums) EXPECT_TRUE(sum.before_finish);
  }
}

TEST(GradientSync, ZeroBucketSizeReducesOnceAfterBackward) {
  Record record;
  Session s(tiny(0, 1), std::make_unique<RecordingCommunicator>(&record));
  s.step(nullptr);
  ASSERT_EQ(record.sums.size(), 1u);
  EXPECT_EQ(record.sums[0].data, s.model().grad_data());
  EXPECT_EQ(record.sums[0].n, s.model().params().total_elems);
}

TEST(GradientSync, JoinedBucketsAreWaitedForThroughTheStreamAndNotStartedAgainAfterAReplay) {
  Record record;
  RecordingCommunicator comm(&record);
  std::vector<float> grads(1000, 1.0f);
  GradientSync sync(comm, grads.data(), 1000, 400 * sizeof(float) / 1048576.0, WirePrecision::fp32, nullptr, true);
  // A direct (or recorded) backward pass: heads, two layers, the embeddings.
  for (int64_t offset : {900, 500, 100, 0}) sync.grads_ready(offset);
  ASSERT_EQ(record.sums.size(), 3u);  // [500, 1000), [100, 500), [0, 100)
  EXPECT_EQ(record.sums[2].data, grads.data());
  EXPECT_EQ(record.joins, 1) << "joined once the backward pass is done";
  sync.finish();
  EXPECT_EQ(record.finishes, 0);
  EXPECT_EQ(record.stream_waits, 1);
  // A replay queued the buckets and their join: nothing is started again, the wait is the stream's.
  sync.replayed();
  sync.finish();
  EXPECT_EQ(record.sums.size(), 3u);
  EXPECT_EQ(record.stream_waits, 2);
  // A step without buckets (no grads_ready: the C API's bert_allreduce after bert_forward_backward)
  // sums the whole buffer after the backward pass and waits for it as before.
  sync.finish();
  ASSERT_EQ(record.sums.size(), 4u);
  EXPECT_EQ(record.sums[3].n, 1000);
  EXPECT_EQ(record.finishes, 1);
}

}  // namespace
}  // namespace bert
