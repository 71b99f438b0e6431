// Items [0, count) shared out in blocks to worker threads, for the data-prep stages that read
// documents or build shards in parallel: each worker keeps its own state and takes blocks until
// none is left; the first exception stops the others at their next block and is rethrown.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

namespace bert {

// The thread count of a `--threads N` option: N, or every core when N <= 0.
int resolve_threads(int requested);

class BlockQueue {
 public:
  BlockQueue(size_t count, size_t block) : count_(count), block_(block) {}
  // The next block [begin, end) to work on; false once none is left or a worker has failed.
  bool next(size_t& begin, size_t& end);
  void fail() { failed_ = true; }

 private:
  const size_t count_, block_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> failed_{false};
};

// Runs worker(id, queue) on `threads` threads (no more than there are blocks), ids 0, 1, ...,
// over a BlockQueue of `count` items in blocks of `block`, and returns when all have finished,
// rethrowing the first exception a worker threw.
void run_workers(int threads, size_t count, size_t block, const std::function<void(size_t id, BlockQueue& queue)>& worker);

}  // namespace bert
