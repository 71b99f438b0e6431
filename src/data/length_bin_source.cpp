// LengthBinSource: one shard source per length bin and a world-wide seeded bin draw per batch.
#include "data/length_bin_source.h"

#include <filesystem>

#include "core/error.h"
#include "core/philox.h"
#include "data/shard_plan.h"
#include "data/shard_reader.h"

namespace bert {
namespace {

constexpr uint32_t kBinStream = 0xB1A5u;  // Philox tensor id of the bin draws

class LengthBinSource : public DataSource {
 public:
  explicit LengthBinSource(const ShardSourceOptions& o) : options_(o) {
    for (const LengthBin& b : list_length_bins(o)) {
      ShardSourceOptions bin = o;
      bin.path = b.path;
      names_.push_back(b.name);
      weights_.push_back(b.rows);
      total_ += b.rows;
      sources_.push_back(make_shard_source(bin));
    }
    taken_.assign(sources_.size(), 0);
  }

  void next(HostBatch& out, int batch_size) override {
    const Philox4 r = philox_block(options_.seed, draws_, kBinStream, 0);
    const uint64_t pick = (static_cast<uint64_t>(r.v[0]) << 32 | r.v[1]) % total_;
    size_t bin = 0;
    for (uint64_t acc = weights_[0]; pick >= acc; acc += weights_[++bin]) {
    }
    sources_[bin]->next(out, batch_size);
    ++draws_;
    ++taken_[bin];
  }

  nlohmann::json cursor() const override {
    nlohmann::json bins = nlohmann::json::array();
    for (const auto& s : sources_) bins.push_back(s->cursor());
    return {{"kind", "length_bins"}, {"draws", draws_}, {"bins", names_}, {"taken", taken_}, {"cursors", bins}};
  }

  void restore(const nlohmann::json& c) override {
    try {
      BERT_CHECK(c.is_object() && c.value("kind", "") == "length_bins", Code::data,
                 "data cursor is not a length-bin cursor: ", c.dump());
      BERT_CHECK(c.at("bins").get<std::vector<std::string>>() == names_, Code::data, "data cursor was saved with bins ",
                 c.at("bins").dump(), " but '", options_.path, "' has ", nlohmann::json(names_).dump());
      for (size_t b = 0; b < sources_.size(); ++b) sources_[b]->restore(c.at("cursors").at(b));
      draws_ = c.at("draws").get<uint64_t>();
      taken_ = c.at("taken").get<std::vector<uint64_t>>();
    } catch (const nlohmann::json::exception& e) {
      fail(Code::data, "bad data cursor ", c.dump(), ": ", e.what());
    }
  }

  std::string describe() const override {
    std::string s = "length bins under '" + options_.path + "':";
    for (size_t b = 0; b < sources_.size(); ++b) s += " " + names_[b] + " (" + std::to_string(weights_[b]) + " rows)";
    return s + "; every rank draws the same bin per batch";
  }

 private:
  ShardSourceOptions options_;
  std::vector<std::string> names_;
  std::vector<uint64_t> weights_;
  uint64_t total_ = 0;
  std::vector<std::unique_ptr<DataSource>> sources_;
  uint64_t draws_ = 0;
  std::vector<uint64_t> taken_;
};

}  // namespace

std::vector<LengthBin> list_length_bins(const ShardSourceOptions& o) {
  namespace fs = std::filesystem;
  const ShardLimits limits{o.max_seq_length, o.max_predictions_per_seq, o.vocab_size};
  std::vector<LengthBin> bins;
  for (int b = 0;; ++b) {
    const fs::path dir = fs::path(o.path) / ("bin_" + std::to_string(b));
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) break;
    LengthBin bin{dir.filename().string(), dir.string(), 0};
    try {
      for (const std::string& f : list_shards(bin.path)) bin.rows += static_cast<uint64_t>(inspect_shard(f, limits, o.format).rows);
    } catch (const Error& e) {
      if (e.code() != Code::data) throw;
      continue;  // an empty bin: bert-prep writes no file for a bin without sequences
    }
    bins.push_back(std::move(bin));
  }
  BERT_CHECK(!bins.empty(), Code::data, "data.length_bins: '", o.path,
             "' holds no bin_0, bin_1, ... directories with shards (make them with bert-prep bins)");
  return bins;
}

std::unique_ptr<DataSource> make_length_bin_source(const ShardSourceOptions& options) {
  return std::make_unique<LengthBinSource>(options);
}

}  // namespace bert
