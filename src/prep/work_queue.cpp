// BlockQueue and run_workers (work_queue.h).
#include "prep/work_queue.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace bert {

int resolve_threads(int requested) {
  return requested > 0 ? requested : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

bool BlockQueue::next(size_t& begin, size_t& end) {
  if (failed_) return false;
  begin = next_.fetch_add(block_);
  if (begin >= count_) return false;
  end = std::min(begin + block_, count_);
  return true;
}

void run_workers(int threads, size_t count, size_t block, const std::function<void(size_t id, BlockQueue& queue)>& worker) {
  BlockQueue queue(count, block);
  std::exception_ptr error;
  std::mutex error_mutex;
  const size_t blocks = (count + block - 1) / block;
  const size_t n = std::min(static_cast<size_t>(std::max(threads, 1)), std::max<size_t>(blocks, 1));
  std::vector<std::thread> pool;
  for (size_t id = 0; id < n; ++id) {
    pool.emplace_back([&, id] {
      try {
        worker(id, queue);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        queue.fail();
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace bert
