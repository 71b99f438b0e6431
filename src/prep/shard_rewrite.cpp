// Shard rewriting: length bins and fixed-size evaluation sets (see shard_rewrite.h).
#include "prep/shard_rewrite.h"

#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "data/sample_order.h"
#include "data/shard_plan.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> all_shards(const std::vector<std::string>& inputs) {
  BERT_CHECK(!inputs.empty(), Code::invalid_argument, "no input shards given");
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    for (std::string& f : list_shards(in)) files.push_back(std::move(f));
  }
  return files;
}

// Sequence i of `s` appended to `out` as an instance (segment A = the leading segment-0 tokens).
void append_instance(const ShardSamples& s, size_t i, InstanceBuffer& out) {
  const int64_t t0 = s.token_begin[i], t1 = s.token_begin[i + 1];
  out.input_ids.insert(out.input_ids.end(), s.input_ids.begin() + t0, s.input_ids.begin() + t1);
  out.token_offsets.push_back(out.input_ids.size());
  uint16_t a = 0;
  while (t0 + a < t1 && s.segment_ids[static_cast<size_t>(t0 + a)] == 0) ++a;
  out.segment_a_length.push_back(a);
  const int64_t p0 = s.pred_begin[i], p1 = s.pred_begin[i + 1];
  out.positions.insert(out.positions.end(), s.masked_lm_positions.begin() + p0, s.masked_lm_positions.begin() + p1);
  out.labels.insert(out.labels.end(), s.masked_lm_ids.begin() + p0, s.masked_lm_ids.begin() + p1);
  out.mask_offsets.push_back(out.positions.size());
  out.random_next.push_back(static_cast<uint8_t>(s.next_sentence_labels[i]));
}

void write_all(const std::string& path, const InstanceBuffer& b, const ShardRewriteOptions& o) {
  BERT_CHECK(o.overwrite || !fs::exists(path), Code::io, "output '", path, "' exists (use --overwrite)");
  std::vector<uint32_t> order(b.size());
  std::iota(order.begin(), order.end(), 0u);
  ShardWriteOptions w = o.write;
  w.max_seq_length = o.limits.max_seq_length;
  w.max_predictions = o.limits.max_predictions_per_seq;
  write_shard(path, b, order, w);
}

}  // namespace

LengthBinSummary split_length_bins(const std::vector<std::string>& inputs, const std::string& output_dir, int bins,
                                   const ShardRewriteOptions& o) {
  BERT_CHECK(bins >= 1 && bins <= o.limits.max_seq_length, Code::invalid_argument, "--bins must be in [1, ",
             o.limits.max_seq_length, "], got ", bins);
  LengthBinSummary sum;
  sum.per_bin.assign(static_cast<size_t>(bins), 0);
  for (int b = 0; b < bins; ++b) fs::create_directories(fs::path(output_dir) / ("bin_" + std::to_string(b)));
  for (const std::string& file : all_shards(inputs)) {
    const ShardSamples s = read_shard(file, o.limits, o.format);
    std::vector<InstanceBuffer> per(static_cast<size_t>(bins));
    for (size_t i = 0; i < s.size(); ++i) {
      append_instance(s, i, per[static_cast<size_t>(length_bin(s.length(i), bins, o.limits.max_seq_length))]);
    }
    const std::string name = fs::path(file).filename().string();
    for (int b = 0; b < bins; ++b) {
      if (per[static_cast<size_t>(b)].size() == 0) continue;  // an empty shard would only be skipped
      write_all((fs::path(output_dir) / ("bin_" + std::to_string(b)) / name).string(), per[static_cast<size_t>(b)], o);
      sum.per_bin[static_cast<size_t>(b)] += per[static_cast<size_t>(b)].size();
    }
    ++sum.files;
  }
  return sum;
}

uint64_t pick_eval_samples(const std::vector<std::string>& inputs, const std::string& output_file, uint64_t count,
                           uint64_t seed, const ShardRewriteOptions& o) {
  BERT_CHECK(count >= 1, Code::invalid_argument, "--samples must be positive");
  std::vector<ShardSamples> shards;
  std::vector<std::pair<uint32_t, uint32_t>> all;  // (shard, sequence)
  for (const std::string& file : all_shards(inputs)) {
    shards.push_back(read_shard(file, o.limits, o.format));
    for (size_t i = 0; i < shards.back().size(); ++i) all.emplace_back(static_cast<uint32_t>(shards.size() - 1), i);
  }
  BERT_CHECK(!all.empty(), Code::data, "the input shards hold no sequences");
  BERT_CHECK(all.size() < (uint64_t{1} << 32), Code::data, "too many input sequences");
  const std::vector<uint32_t> order = shuffled_indices(static_cast<uint32_t>(all.size()), seed, 0, 0);
  const size_t n = std::min<size_t>(count, all.size());
  InstanceBuffer out;
  for (size_t k = 0; k < n; ++k) append_instance(shards[all[order[k]].first], all[order[k]].second, out);
  if (fs::path(output_file).has_parent_path()) fs::create_directories(fs::path(output_file).parent_path());
  write_all(output_file, out, o);
  return n;
}

}  // namespace bert
