// Shard statistics and decoding for bert-prep inspect.
#include "prep/shard_inspect.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "data/shard_reader.h"

namespace bert {
namespace {

std::string percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::string fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string detokenize(const Vocab& vocab, const int32_t* ids, size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = vocab.token(ids[i]);
    if (vocab.is_continuation(ids[i]) && !text.empty()) {
      text.append(t, 2, std::string::npos);
    } else {
      if (!text.empty()) text.push_back(' ');
      text += t;
    }
  }
  return text;
}

void inspect_shard_file(const std::string& path, const Vocab& vocab, const InspectOptions& options, std::ostream& out) {
  ShardLimits limits;
  limits.max_seq_length = 65535;
  limits.max_predictions_per_seq = 65535;
  limits.vocab_size = vocab.size();
  const ShardHeader header = inspect_shard(path, limits);
  const ShardSamples s = read_shard(path, limits);
  const size_t n = s.size();

  int max_len = 0;
  uint64_t tokens = 0, masks = 0, as_mask = 0, kept = 0, random_next = 0, seg_a = 0;
  for (size_t i = 0; i < n; ++i) {
    max_len = std::max(max_len, s.length(i));
    tokens += static_cast<uint64_t>(s.length(i));
    random_next += s.next_sentence_labels[i] != 0;
    for (int64_t t = s.token_begin[i]; t < s.token_begin[i + 1]; ++t) seg_a += s.segment_ids[static_cast<size_t>(t)] == 0;
    for (int64_t k = s.pred_begin[i]; k < s.pred_begin[i + 1]; ++k) {
      const auto kk = static_cast<size_t>(k);
      const int32_t shown = s.input_ids[static_cast<size_t>(s.token_begin[i] + s.masked_lm_positions[kk])];
      ++masks;
      as_mask += shown == vocab.mask_id;
      kept += shown == s.masked_lm_ids[kk];
    }
  }
  const int width = header.seq_width > 0 ? static_cast<int>(header.seq_width) : std::max(max_len, 1);
  out << "shard: " << path << "\n";
  out << "format: " << format_name(header.format) << ", rows " << header.rows << ", sequences " << n;
  if (header.seq_width > 0) out << ", max_seq_length " << header.seq_width << ", max_predictions " << header.pred_width;
  out << "\n";
  if (n == 0) {
    out << "(no samples)\n";
    return;
  }
  const double dn = static_cast<double>(n);
  out << "tokens: " << tokens << " real, mean length " << fixed(static_cast<double>(tokens) / dn) << ", longest "
      << max_len;
  if (header.seq_width > 0) out << ", padding " << percent(n * static_cast<uint64_t>(width) - tokens, n * static_cast<uint64_t>(width));
  out << "\n";
  out << "segments: mean A " << fixed(static_cast<double>(seg_a) / dn) << " tokens, mean B "
      << fixed(static_cast<double>(tokens - seg_a) / dn) << " tokens (with [CLS]/[SEP])\n";
  out << "next sentence: " << percent(random_next, n) << " random, " << percent(n - random_next, n) << " actual next\n";
  out << "masked LM: " << masks << " predictions, " << fixed(static_cast<double>(masks) / dn, 2) << " per sequence, "
      << percent(masks, tokens) << " of tokens; shown as [MASK] " << percent(as_mask, masks) << ", kept "
      << percent(kept, masks) << ", random " << percent(masks - as_mask - kept, masks) << "\n";

  const int bins = std::max(1, options.histogram_bins);
  const int bin_width = (width + bins - 1) / bins;
  std::vector<uint64_t> hist(static_cast<size_t>(bins), 0);
  for (size_t i = 0; i < n; ++i) ++hist[static_cast<size_t>(std::min(bins - 1, (s.length(i) - 1) / bin_width))];
  const uint64_t peak = *std::max_element(hist.begin(), hist.end());
  out << "length histogram:\n";
  for (int b = 0; b < bins; ++b) {
    char label[48];
    std::snprintf(label, sizeof label, "  %4d-%-4d %8llu  ", b * bin_width + 1, std::min(width, (b + 1) * bin_width),
                  static_cast<unsigned long long>(hist[static_cast<size_t>(b)]));
    out << label << std::string(peak ? 40 * hist[static_cast<size_t>(b)] / peak : 0, '#') << "\n";
  }

  const size_t show = std::min(n, static_cast<size_t>(std::max(0, options.samples_to_show)));
  for (size_t i = 0; i < show; ++i) {
    const int32_t* ids = s.input_ids.data() + s.token_begin[i];
    const int8_t* seg = s.segment_ids.data() + s.token_begin[i];
    const int len = s.length(i);
    int a_len = 0;
    while (a_len < len && seg[a_len] == 0) ++a_len;
    out << "sample " << i << ": length " << len << ", next_sentence_label " << int(s.next_sentence_labels[i])
        << ", predictions " << s.predictions(i) << "\n";
    out << "  A: " << detokenize(vocab, ids, static_cast<size_t>(a_len)) << "\n";
    out << "  B: " << detokenize(vocab, ids + a_len, static_cast<size_t>(len - a_len)) << "\n";
    out << "  masked:";
    for (int64_t k = s.pred_begin[i]; k < s.pred_begin[i + 1]; ++k) {
      const auto kk = static_cast<size_t>(k);
      const int32_t pos = s.masked_lm_positions[kk];
      out << " " << pos << ":" << vocab.token(ids[pos]) << "->" << vocab.token(s.masked_lm_ids[kk]);
    }
    out << "\n";
  }
}

}  // namespace bert
