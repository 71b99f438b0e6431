// ShardSource: the consumer side of the shard pipeline. It validates options and shard headers,
// owns the prefetch thread (restarted from the cursor when restored or when the batch size
// changes), and serialises its position as {"kind": "shards", epoch, slot, sample, ...}.
#include "data/shard_source.h"

#include "core/error.h"
#include "core/log.h"
#include "data/shard_plan.h"
#include "data/shard_prefetcher.h"

namespace bert {
namespace {

class ShardSource : public DataSource {
 public:
  explicit ShardSource(const ShardSourceOptions& o) : options_(o) {
    BERT_CHECK(o.max_seq_length >= 2, Code::config, "data.max_seq_length must be at least 2 (got ", o.max_seq_length,
               ")");
    BERT_CHECK(o.max_predictions_per_seq >= 1, Code::config, "data.max_predictions_per_seq must be at least 1 (got ",
               o.max_predictions_per_seq, ")");
    BERT_CHECK(o.vocab_size >= 1, Code::config, "vocab_size must be positive (got ", o.vocab_size, ")");
    BERT_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world, Code::config, "rank ", o.rank, " is not in [0, world ",
               o.world, ")");
    BERT_CHECK(o.bucket_bins >= 0 && o.bucket_bins <= o.max_seq_length, Code::config,
               "bucket_bins must be in [0, max_seq_length] (got ", o.bucket_bins, ")");
    BERT_CHECK(o.batch_size >= 0 && o.prefetch_batches >= 1, Code::config,
               "batch_size must be >= 0 and prefetch_batches >= 1");

    auto d = std::make_shared<ShardDataset>();
    d->path = o.path;
    d->files = list_shards(o.path);
    d->bad.assign(d->files.size(), 0);
    d->limits = ShardLimits{o.max_seq_length, o.max_predictions_per_seq, o.vocab_size};
    d->format = o.format;
    d->order.seed = o.seed;
    d->order.shuffle = o.shuffle;
    d->order.bucket_bins = o.bucket_bins;
    d->order.max_seq_length = o.max_seq_length;
    d->rank = o.rank;
    d->world = o.world;
    d->skip_bad_shards = o.skip_bad_shards;
    BERT_CHECK(d->files.size() < (uint64_t{1} << 32), Code::data, "too many shards in '", o.path, "'");

    int64_t rows = 0;
    size_t bad = 0;
    for (size_t i = 0; i < d->files.size(); ++i) {
      try {
        rows += inspect_shard(d->files[i], d->limits, o.format).rows;
      } catch (const Error& e) {
        if (!o.skip_bad_shards || e.code() == Code::config) throw;
        log_message(log_warning, std::string("skipping bad shard: ") + e.what());
        d->bad[i] = 1;
        ++bad;
      }
    }
    BERT_CHECK(rows > 0, Code::data, "no samples in '", o.path, "' (", d->files.size(), " shard files, ", bad,
               " skipped as bad)");
    data_ = std::move(d);
    if (o.batch_size > 0) start(o.batch_size);
  }

  void next(HostBatch& out, int batch_size) override {
    BERT_CHECK(batch_size >= 1, Code::invalid_argument, "batch size must be positive (got ", batch_size, ")");
    if (!prefetch_ || batch_size != prefetch_batch_) {
      if (options_.bucket_bins > 0 && cursor_.sample > 0 && order_batch_ != 0 && order_batch_ != batch_size) {
        log_message(log_warning, "length-bucketed data: batch size changed from " + std::to_string(order_batch_) +
                                     " to " + std::to_string(batch_size) +
                                     " mid-shard; the rest of this shard follows the new size's order");
      }
      start(batch_size);
    }
    cursor_ = prefetch_->pop(out);
  }

  nlohmann::json cursor() const override {
    nlohmann::json c = {{"kind", "shards"},         {"epoch", cursor_.epoch},       {"slot", cursor_.slot},
                        {"sample", cursor_.sample}, {"files", data_->files.size()}, {"rank", options_.rank},
                        {"world", options_.world},  {"seed", options_.seed}};
    if (options_.bucket_bins > 0) c["batch_size"] = order_batch_;
    return c;
  }

  void restore(const nlohmann::json& c) override {
    ShardCursor pos;
    int batch = 0;
    try {
      BERT_CHECK(c.is_object() && c.value("kind", "") == "shards", Code::data,
                 "data cursor is not a shard-source cursor: ", c.dump());
      expect_same(c, "files", data_->files.size());
      expect_same(c, "rank", options_.rank);
      expect_same(c, "world", options_.world);
      expect_same(c, "seed", options_.seed);
      pos.epoch = c.at("epoch").get<uint64_t>();
      pos.slot = c.at("slot").get<uint64_t>();
      pos.sample = c.at("sample").get<uint64_t>();
      if (options_.bucket_bins > 0) batch = c.value("batch_size", 0);
    } catch (const nlohmann::json::exception& e) {
      fail(Code::data, "bad data cursor ", c.dump(), ": ", e.what());
    }
    const uint64_t spe = slots_per_epoch(static_cast<uint32_t>(data_->files.size()), options_.world);
    BERT_CHECK(pos.slot < spe, Code::data, "data cursor slot ", pos.slot, " is beyond the ", spe,
               " shards per epoch of this rank");
    prefetch_.reset();
    cursor_ = pos;
    order_batch_ = batch;
  }

  std::string describe() const override {
    std::string s = "HDF5 shards '" + options_.path + "': " + std::to_string(data_->files.size()) + " files, format " +
                    options_.format + ", rank " + std::to_string(options_.rank) + " of " +
                    std::to_string(options_.world) + ", seq " + std::to_string(options_.max_seq_length) +
                    ", predictions " + std::to_string(options_.max_predictions_per_seq);
    if (options_.bucket_bins > 0) s += ", " + std::to_string(options_.bucket_bins) + " length buckets";
    return s;
  }

 private:
  template <typename T>
  static void expect_same(const nlohmann::json& c, const char* key, T mine) {
    const T saved = c.at(key).get<T>();
    BERT_CHECK(saved == mine, Code::data, "data cursor was saved with ", key, " = ", saved, " but this source has ",
               key, " = ", mine, "; it cannot continue that position");
  }

  void start(int batch_size) {
    prefetch_.reset();
    prefetch_ =
        std::make_unique<ShardPrefetcher>(data_, cursor_, batch_size, static_cast<size_t>(options_.prefetch_batches));
    prefetch_batch_ = batch_size;
    order_batch_ = batch_size;
  }

  ShardSourceOptions options_;
  std::shared_ptr<const ShardDataset> data_;
  ShardCursor cursor_;
  std::unique_ptr<ShardPrefetcher> prefetch_;
  int prefetch_batch_ = 0;
  int order_batch_ = 0;  // batch size the bucketed order of the cursor's shard was built for
};

}  // namespace

std::unique_ptr<DataSource> make_shard_source(const ShardSourceOptions& options) {
  return std::make_unique<ShardSource>(options);
}

}  // namespace bert
