// The prefetch thread. Its loop: while the batch queue has room, assemble a batch from the
// current shard; otherwise decode one band of the next shard; otherwise sleep until the
// consumer takes a batch. Bad shards are skipped with a warning when skip_bad_shards is set;
// otherwise their error is raised when the stream reaches them.
#include "data/shard_prefetcher.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "data/shard_plan.h"

namespace bert {
namespace {

struct Stopped {};  // unwinds the thread when the owner shuts it down mid-decode

}  // namespace

struct ShardPrefetcher::Loaded {
  uint64_t epoch = 0, slot = 0;
  ShardSamples samples;
  std::vector<uint32_t> order;
};

struct ShardPrefetcher::Pending {
  uint64_t epoch = 0, slot = 0;
  ShardSlot plan;
  std::unique_ptr<ShardReader> reader;
  int64_t next_row = 0;
  ShardSamples samples;
  std::exception_ptr error;
  bool done = false;
};

ShardPrefetcher::ShardPrefetcher(std::shared_ptr<const ShardDataset> data, ShardCursor start, int batch_size,
                                 size_t depth)
    : data_(std::move(data)),
      batch_size_(batch_size),
      depth_(std::max<size_t>(1, depth)),
      slots_per_epoch_(slots_per_epoch(static_cast<uint32_t>(data_->files.size()), data_->world)),
      pos_(start) {
  thread_ = std::thread(&ShardPrefetcher::run, this);
}

ShardPrefetcher::~ShardPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  room_.notify_all();
  thread_.join();
}

ShardCursor ShardPrefetcher::pop(HostBatch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  Item item = std::move(queue_.front());
  queue_.pop_front();
  std::swap(out, item.batch);
  free_.push_back(std::move(item.batch));
  lock.unlock();
  room_.notify_one();
  return item.after;
}

bool ShardPrefetcher::stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

ShardCursor ShardPrefetcher::advance(uint64_t epoch, uint64_t slot) const {
  return slot + 1 < slots_per_epoch_ ? ShardCursor{epoch, slot + 1, 0} : ShardCursor{epoch + 1, 0, 0};
}

void ShardPrefetcher::run() {
  try {
    begin_pending(pos_.epoch, pos_.slot);
    take_pending();
    const ShardCursor next = advance(cur_->epoch, cur_->slot);
    begin_pending(next.epoch, next.slot);
    for (;;) {
      bool room;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        room = queue_.size() < depth_;
      }
      if (room) {
        produce_batch();
      } else if (pending_ && !pending_->done) {
        step_pending();
      } else {
        std::unique_lock<std::mutex> lock(mu_);
        room_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
      }
    }
  } catch (const Stopped&) {
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    ready_.notify_all();
  }
}

void ShardPrefetcher::produce_batch() {
  HostBatch batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      batch = std::move(free_.back());
      free_.pop_back();
    }
  }
  const int S = data_->limits.max_seq_length, P = data_->limits.max_predictions_per_seq;
  if (batch.batch_size != batch_size_ || batch.seq_length != S || batch.max_predictions != P) {
    batch.resize(batch_size_, S, P);
  }
  for (int b = 0; b < batch_size_; ++b) {
    ensure_sample();
    cur_->samples.copy_to(cur_->order[pos_.sample], batch, b);  // fills the whole row, padding included
    ++pos_.sample;
    empty_streak_ = 0;
  }
  ShardCursor after = pos_;
  if (after.sample >= cur_->order.size()) after = advance(cur_->epoch, cur_->slot);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(batch), after});
  }
  ready_.notify_one();
}

void ShardPrefetcher::ensure_sample() {
  const uint64_t limit = 2 * std::max<uint64_t>(slots_per_epoch_, data_->files.size()) + 1;
  while (pos_.sample >= cur_->order.size()) {
    if (++empty_streak_ > limit) {
      fail(Code::data, "no usable samples for rank ", data_->rank, " of ", data_->world, " in ", limit,
           " consecutive shards of '", data_->path, "'");
    }
    move_to_next_slot();
    pos_ = ShardCursor{cur_->epoch, cur_->slot, 0};
  }
}

void ShardPrefetcher::move_to_next_slot() {
  const ShardCursor next = advance(cur_->epoch, cur_->slot);
  if (!pending_ || pending_->epoch != next.epoch || pending_->slot != next.slot) begin_pending(next.epoch, next.slot);
  take_pending();
  const ShardCursor after = advance(next.epoch, next.slot);
  begin_pending(after.epoch, after.slot);
}

void ShardPrefetcher::begin_pending(uint64_t epoch, uint64_t slot) {
  const ShardDataset& d = *data_;
  pending_ = std::make_unique<Pending>();
  pending_->epoch = epoch;
  pending_->slot = slot;
  pending_->plan =
      epoch_slots(static_cast<uint32_t>(d.files.size()), d.order.seed, epoch, d.rank, d.world, d.order.shuffle)[slot];
  if (d.bad[pending_->plan.file]) {
    pending_->done = true;  // rejected at construction; the warning was given then
    return;
  }
  try {
    pending_->reader = std::make_unique<ShardReader>(d.files[pending_->plan.file], d.limits, d.format);
    pending_->done = pending_->reader->header().rows == 0;
  } catch (const Error& e) {
    if (!d.skip_bad_shards) throw;
    log_message(log_warning, std::string("skipping bad shard: ") + e.what());
    pending_->done = true;
  }
}

void ShardPrefetcher::step_pending() {
  Pending& p = *pending_;
  const int64_t rows = p.reader->header().rows;
  const int64_t count = std::min(p.reader->band_rows(), rows - p.next_row);
  try {
    p.reader->read_rows(p.next_row, count, p.samples);
    p.next_row += count;
    if (p.next_row >= rows) {
      p.done = true;
      p.reader.reset();
    }
  } catch (const Error& e) {
    p.done = true;
    p.reader.reset();
    p.samples = ShardSamples();
    if (!data_->skip_bad_shards) {
      p.error = std::current_exception();  // raised when the stream reaches this shard
    } else {
      log_message(log_warning, std::string("skipping bad shard: ") + e.what());
    }
  }
}

void ShardPrefetcher::finish_pending() {
  while (!pending_->done) {
    if (stopping()) throw Stopped{};
    step_pending();
  }
}

void ShardPrefetcher::take_pending() {
  finish_pending();
  if (pending_->error) std::rethrow_exception(pending_->error);
  auto loaded = std::make_unique<Loaded>();
  loaded->epoch = pending_->epoch;
  loaded->slot = pending_->slot;
  OrderSpec spec = data_->order;
  spec.batch_size = batch_size_;
  loaded->order = sample_order(pending_->samples, pending_->plan, pending_->epoch, spec);
  loaded->samples = std::move(pending_->samples);
  pending_.reset();
  cur_ = std::move(loaded);
}

}  // namespace bert
