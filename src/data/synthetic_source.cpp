// Synthetic batches drawn from Philox(seed, sample index): [CLS] a [SEP] b [SEP] padding, 15%
// of the real tokens masked (up to max_predictions), random NSP labels. Sample i is the same
// whatever the batch size, and the cursor is just the next sample index.
#include "data/synthetic_source.h"

#include <algorithm>

#include "core/error.h"
#include "core/philox.h"

namespace bert {
namespace {

constexpr int32_t kCls = 101, kSep = 102, kFirstWordId = 999;

class SyntheticSource : public DataSource {
 public:
  explicit SyntheticSource(const SyntheticOptions& o) : o_(o) {
    BERT_CHECK(o.vocab_size >= 8 && o.seq_length >= 3, Code::config,
               "synthetic data needs vocab_size >= 8 and data.max_seq_length >= 3");
  }

  void next(HostBatch& out, int batch_size) override {
    const int S = o_.seq_length, P = o_.max_predictions;
    out.resize(batch_size, S, P);
    for (int b = 0; b < batch_size; ++b) fill_sample(out, b, next_sample_++);
  }

  nlohmann::json cursor() const override { return {{"sample", next_sample_}}; }
  void restore(const nlohmann::json& c) override { next_sample_ = c.at("sample").get<uint64_t>(); }
  std::string describe() const override { return "synthetic (seed " + std::to_string(o_.seed) + ")"; }

 private:
  // Uniform integer in [0, n) from word k of sample `index`'s random stream.
  uint32_t draw(uint64_t index, uint64_t k, uint32_t n) const {
    Philox4 r = philox_block(o_.seed, index, 0x5EEDu, k / 4);
    return static_cast<uint32_t>((static_cast<uint64_t>(r.v[k % 4]) * n) >> 32);
  }

  void fill_sample(HostBatch& out, int b, uint64_t index) const {
    const int S = o_.seq_length, P = o_.max_predictions;
    const int V = o_.vocab_size;
    // Special ids only when the vocabulary is BERT-sized; tiny vocabularies use 1 and 2.
    const int32_t cls = V > kFirstWordId ? kCls : 1, sep = V > kFirstWordId ? kSep : 2;
    const int32_t first_word = V > kFirstWordId ? kFirstWordId : 3;
    uint64_t k = 0;
    const int len = std::max(3, S / 2 + static_cast<int>(draw(index, k++, S - S / 2 + 1)));
    const int real = std::min(len, S);
    const int split = 1 + static_cast<int>(draw(index, k++, std::max(1, real - 2)));
    int32_t* ids = &out.input_ids[static_cast<size_t>(b) * S];
    int32_t* seg = &out.segment_ids[static_cast<size_t>(b) * S];
    int32_t* mask = &out.input_mask[static_cast<size_t>(b) * S];
    // Half of the tokens walk the vocabulary with a per-sample start and stride (predictable from
    // their neighbours), the others follow a skewed unigram distribution, so the MLM loss can fall.
    const uint32_t range = static_cast<uint32_t>(V - first_word);
    const uint32_t start = draw(index, k++, range), stride = 1 + draw(index, k++, 7);
    for (int s = 0; s < real; ++s) {
      uint32_t offset;
      if (draw(index, k++, 2) == 0) {
        offset = static_cast<uint32_t>((start + static_cast<uint64_t>(s) * stride) % range);
      } else {
        const double u = draw(index, k++, 1u << 24) / 16777216.0;
        offset = static_cast<uint32_t>(range * u * u * u);
      }
      ids[s] = first_word + static_cast<int32_t>(offset);
      seg[s] = s > split ? 1 : 0;
      mask[s] = 1;
    }
    ids[0] = cls;
    ids[split] = sep;
    ids[real - 1] = sep;
    int n_masked = 0;
    for (int s = 1; s < real - 1 && n_masked < P; ++s) {
      if (s == split || draw(index, k++, 100) >= 15) continue;
      out.masked_lm_positions[static_cast<size_t>(b) * P + n_masked] = s;
      out.masked_lm_ids[static_cast<size_t>(b) * P + n_masked] = ids[s];
      ids[s] = V > kFirstWordId ? 103 : 4;  // [MASK]
      ++n_masked;
    }
    out.next_sentence_labels[b] = static_cast<int32_t>(draw(index, k++, 2));
  }

  SyntheticOptions o_;
  uint64_t next_sample_ = 0;
};

}  // namespace

std::unique_ptr<DataSource> make_synthetic_source(const SyntheticOptions& options) {
  return std::make_unique<SyntheticSource>(options);
}

}  // namespace bert
