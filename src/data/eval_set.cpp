// EvalSet: the in-memory evaluation set and its fixed batching (see eval_set.h).
#include "data/eval_set.h"

#include <algorithm>

#include "core/error.h"
#include "data/shard_plan.h"

namespace bert {

std::unique_ptr<EvalSet> EvalSet::from_shards(const std::string& path, const ShardLimits& limits,
                                              const std::string& format, int64_t max_samples, int batch_size) {
  BERT_CHECK(batch_size >= 1, Code::config, "evaluation batch size must be positive (got ", batch_size, ")");
  std::unique_ptr<EvalSet> set(new EvalSet(batch_size, limits.max_seq_length, limits.max_predictions_per_seq));
  for (const std::string& file : list_shards(path)) {
    if (max_samples > 0 && set->samples_ >= max_samples) break;
    ShardSamples s = read_shard(file, limits, format);
    if (s.size() == 0) continue;
    set->shard_begin_.push_back(set->samples_);
    set->samples_ += static_cast<int64_t>(s.size());
    set->shards_.push_back(std::move(s));
  }
  BERT_CHECK(set->samples_ > 0, Code::data, "no evaluation samples in '", path, "'");
  BERT_CHECK(set->samples_ >= max_samples, Code::config, "config key 'data.eval_samples' = ", max_samples,
             " but data.eval_dir '", path, "' holds ", set->samples_, " sequences");
  if (max_samples > 0) set->samples_ = max_samples;
  return set;
}

std::unique_ptr<EvalSet> EvalSet::from_source(DataSource& source, int batches, int batch_size) {
  BERT_CHECK(batches >= 1 && batch_size >= 1, Code::config, "evaluation needs at least one batch");
  std::unique_ptr<EvalSet> set(new EvalSet(batch_size, 0, 0));
  set->fixed_.resize(static_cast<size_t>(batches));
  for (HostBatch& b : set->fixed_) source.next(b, batch_size);
  set->samples_ = static_cast<int64_t>(batches) * batch_size;
  return set;
}

void EvalSet::batch(int64_t k, HostBatch& out) const {
  BERT_CHECK(k >= 0 && k < batches(), Code::internal, "evaluation batch ", k, " of ", batches());
  if (!fixed_.empty()) {
    out = fixed_[static_cast<size_t>(k)];
    return;
  }
  const int64_t begin = k * batch_size_, end = std::min(samples_, begin + batch_size_);
  out.resize(static_cast<int>(end - begin), seq_length_, max_predictions_);
  // The shard holding `begin`, then walk forward.
  size_t shard = static_cast<size_t>(std::upper_bound(shard_begin_.begin(), shard_begin_.end(), begin) -
                                     shard_begin_.begin() - 1);
  for (int64_t i = begin; i < end; ++i) {
    while (i - shard_begin_[shard] >= static_cast<int64_t>(shards_[shard].size())) ++shard;
    shards_[shard].copy_to(static_cast<size_t>(i - shard_begin_[shard]), out, static_cast<int>(i - begin));
  }
}

}  // namespace bert
