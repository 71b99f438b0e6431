// The background side of the shard data source: one thread that decodes the next shard (a band
// of rows at a time) and assembles the next batches into a bounded queue while the consumer
// trains. At most two decoded shards are in memory (the one being batched and the next one).
// An error in the thread is re-thrown by pop() once the batches produced before it are taken.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/sample_order.h"
#include "data/shard_reader.h"

namespace bert {

// A position in the rank's stream: slot `slot` of epoch `epoch` (see shard_plan.h), sample
// `sample` of that slot's order (see sample_order.h).
struct ShardCursor {
  uint64_t epoch = 0;
  uint64_t slot = 0;
  uint64_t sample = 0;
};

// What the thread needs to know about the dataset; fixed while reading it.
struct ShardDataset {
  std::string path;
  std::vector<std::string> files;  // sorted
  std::vector<char> bad;           // 1: header rejected at construction (skip_bad_shards)
  ShardLimits limits;
  std::string format = "auto";
  OrderSpec order;  // batch_size is set per prefetcher
  int rank = 0, world = 1;
  bool skip_bad_shards = false;
};

class ShardPrefetcher {
 public:
  ShardPrefetcher(std::shared_ptr<const ShardDataset> data, ShardCursor start, int batch_size, size_t depth);
  ~ShardPrefetcher();  // stops and joins the thread
  ShardPrefetcher(const ShardPrefetcher&) = delete;
  ShardPrefetcher& operator=(const ShardPrefetcher&) = delete;

  // The next batch (swapped into `out`) and the cursor just after it.
  ShardCursor pop(HostBatch& out);

 private:
  struct Loaded;
  struct Pending;
  struct Item {
    HostBatch batch;
    ShardCursor after;
  };

  void run();
  void produce_batch();
  void ensure_sample();
  void move_to_next_slot();
  void begin_pending(uint64_t epoch, uint64_t slot);
  void step_pending();
  void finish_pending();
  void take_pending();
  ShardCursor advance(uint64_t epoch, uint64_t slot) const;
  bool stopping();

  std::shared_ptr<const ShardDataset> data_;
  const int batch_size_;
  const size_t depth_;
  const uint64_t slots_per_epoch_;

  // Thread-owned state.
  ShardCursor pos_;
  std::unique_ptr<Loaded> cur_;
  std::unique_ptr<Pending> pending_;
  uint64_t empty_streak_ = 0;

  // Shared with the consumer.
  std::mutex mu_;
  std::condition_variable room_, ready_;
  std::deque<Item> queue_;
  std::vector<HostBatch> free_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bert
