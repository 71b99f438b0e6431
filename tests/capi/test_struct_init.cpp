// The *_init functions of the growable structs: the header's macros pass the host's sizeof, the
// *_init_sized functions write no byte past the size they are given (a host built against an
// older, smaller struct), and the unsized symbols kept for hosts built before the macros write
// the structs as they were then. The library then reads such a smaller struct correctly.
#include <bert.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "test_batch.h"

namespace {

constexpr unsigned char kCanary = 0xAB;

// A struct's storage followed by canary bytes; `host_size` is what an older host's struct holds.
template <typename Struct>
struct Guarded {
  std::vector<unsigned char> bytes = std::vector<unsigned char>(sizeof(Struct) + 64, kCanary);
  Struct* get() { return reinterpret_cast<Struct*>(bytes.data()); }
  // Index of the first byte at or after `from` that is not the canary (bytes.size() if none).
  size_t first_written_after(size_t from) const {
    for (size_t i = from; i < bytes.size(); ++i)
      if (bytes[i] != kCanary) return i;
    return bytes.size();
  }
};

template <typename Struct, typename Init>
void expect_prefix_only(Init init_sized, size_t host_size) {
  Guarded<Struct> g;
  init_sized(g.get(), host_size);
  EXPECT_EQ(g.get()->struct_size, host_size);
  EXPECT_EQ(g.first_written_after(host_size), g.bytes.size()) << "wrote past the host's " << host_size << " bytes";
}

TEST(StructInit, SizedInitWritesOnlyTheHostsBytes) {
  expect_prefix_only<bert_batch>(bert_batch_init_sized, offsetof(bert_batch, labels));
  expect_prefix_only<bert_eval_result>(bert_eval_result_init_sized, offsetof(bert_eval_result, task_loss));
  expect_prefix_only<bert_step_result>(bert_step_result_init_sized, offsetof(bert_step_result, sequences));
  expect_prefix_only<bert_memory_info>(bert_memory_info_init_sized, offsetof(bert_memory_info, peak_device_bytes));
  expect_prefix_only<bert_dist>(bert_dist_init_sized, offsetof(bert_dist, nccl_unique_id));
}

TEST(StructInit, SizedInitCapsAtTheLibrarysSizeAndIgnoresTinySizes) {
  Guarded<bert_batch> g;
  bert_batch_init_sized(g.get(), sizeof(bert_batch) + 32);  // a newer host's larger struct
  EXPECT_EQ(g.get()->struct_size, sizeof(bert_batch));
  EXPECT_EQ(g.first_written_after(sizeof(bert_batch)), g.bytes.size());
  Guarded<bert_batch> tiny;
  bert_batch_init_sized(tiny.get(), sizeof(size_t) - 1);
  EXPECT_EQ(tiny.first_written_after(0), tiny.bytes.size());
  bert_batch_init_sized(nullptr, sizeof(bert_batch));  // no crash
}

TEST(StructInit, MacrosFillTheWholeStructWithDefaults) {
  bert_batch b;
  std::memset(&b, 0x5A, sizeof b);
  bert_batch_init(&b);
  EXPECT_EQ(b.struct_size, sizeof b);
  EXPECT_EQ(b.labels, nullptr);
  EXPECT_EQ(b.end_positions, nullptr);
  bert_dist d;
  std::memset(&d, 0x5A, sizeof d);
  bert_dist_init(&d);
  EXPECT_EQ(d.struct_size, sizeof d);
  EXPECT_EQ(d.backend, BERT_DIST_AUTO);
  EXPECT_EQ(d.rank, -1);
  EXPECT_EQ(d.world_size, -1);
  EXPECT_EQ(d.local_rank, -1);
  EXPECT_EQ(d.has_nccl_unique_id, 0);
  bert_eval_result e;
  bert_eval_result_init(&e);
  EXPECT_EQ(e.struct_size, sizeof e);
  EXPECT_EQ(e.task_count, 0);
}

// A host built against the first release's bert_batch (no label fields) trains a pretraining
// session: its smaller struct is filled by the sized init and read without labels.
TEST(StructInit, OlderSmallerBatchStillTrains) {
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(kTinyConfig, nullptr, &s), BERT_OK) << bert_last_error();
  std::vector<int32_t> ids(32, 5), seg(32, 0), mask(32, 1), pos = {1, 2, 3, 4}, mlm = {7, 8, 9, 10}, nsp = {0, 1};
  Guarded<bert_batch> g;
  const size_t v1 = offsetof(bert_batch, labels);
  bert_batch_init_sized(g.get(), v1);
  bert_batch* b = g.get();
  b->batch_size = 2;
  b->seq_length = 16;
  b->max_predictions = 2;
  b->input_ids = ids.data();
  b->segment_ids = seg.data();
  b->input_mask = mask.data();
  b->masked_lm_positions = pos.data();
  b->masked_lm_ids = mlm.data();
  b->next_sentence_labels = nsp.data();
  bert_step_result r;
  bert_step_result_init(&r);
  EXPECT_EQ(bert_step(s, b, &r), BERT_OK) << bert_last_error();
  EXPECT_GT(r.loss, 0.0f);
  EXPECT_EQ(r.step, 1);
  bert_session_destroy(s);
}

}  // namespace

// The unsized symbols libbert keeps for hosts built before the *_init macros.
#undef bert_batch_init
#undef bert_dist_init
#undef bert_eval_result_init
extern "C" void bert_batch_init(bert_batch* batch);
extern "C" void bert_dist_init(bert_dist* dist);
extern "C" void bert_eval_result_init(bert_eval_result* result);

namespace {

TEST(StructInit, UnsizedSymbolsWriteTheStructsAsTheyWere) {
  Guarded<bert_batch> b;
  bert_batch_init(b.get());
  const size_t batch_size = offsetof(bert_batch, end_positions) + sizeof(const int32_t*);
  EXPECT_EQ(b.get()->struct_size, batch_size);
  EXPECT_EQ(b.first_written_after(batch_size), b.bytes.size());
  Guarded<bert_dist> d;
  bert_dist_init(d.get());
  EXPECT_EQ(d.get()->rank, -1);
  EXPECT_EQ(d.get()->struct_size, offsetof(bert_dist, nccl_unique_id) + BERT_NCCL_UNIQUE_ID_BYTES);
  Guarded<bert_eval_result> e;
  bert_eval_result_init(e.get());
  EXPECT_EQ(e.get()->struct_size, offsetof(bert_eval_result, task_count) + sizeof(int64_t));
  // What they wrote is accepted: a session created with that bert_dist.
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(kTinyConfig, d.get(), &s), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
}

}  // namespace
