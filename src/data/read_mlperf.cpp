// Decoder of the MLPerf variable-length shard format (one vlen array per sample: int16
// input_ids, int8 segment_ids, int16 masked_lm_positions/ids; int8 next_sentence_labels [N];
// no input_mask: every stored token is real) and of its packed variant, where a row holds
// several sequences described by packed_input_len / packed_masked_lm_len, next_sentence_labels
// is one vlen entry per sequence, and masked positions count from the start of the row. Packed
// rows are unpacked here into separate sequences with positions rebased to each sequence.
#include <numeric>
#include <optional>
#include <vector>

#include "data/h5_dataset.h"
#include "data/shard_decoders.h"

namespace bert {
namespace {

constexpr int64_t kBandRows = 8192;

class MlperfDecoder : public RowDecoder {
 public:
  MlperfDecoder(hid_t file, const ShardHeader& h, const ShardLimits& limits)
      : header_(h),
        limits_(limits),
        packed_(h.format == ShardFormat::mlperf_packed),
        ids_(file, h.file, "input_ids"),
        seg_(file, h.file, "segment_ids"),
        pos_(file, h.file, "masked_lm_positions"),
        mid_(file, h.file, "masked_lm_ids"),
        nsl_(file, h.file, "next_sentence_labels") {
    if (packed_) {
      plen_.emplace(file, h.file, "packed_input_len");
      pmlen_.emplace(file, h.file, "packed_masked_lm_len");
    }
  }

  int64_t band_rows() const override { return kBandRows; }

  void read_rows(int64_t begin, int64_t count, ShardSamples& out) override {
    ids_.read_vlen_int32(begin, count, ids_.values, ids_.lengths);
    seg_.read_vlen_int32(begin, count, seg_.values, seg_.lengths);
    pos_.read_vlen_int32(begin, count, pos_.values, pos_.lengths);
    mid_.read_vlen_int32(begin, count, mid_.values, mid_.lengths);
    if (packed_) {
      nsl_.read_vlen_int32(begin, count, nsl_.values, nsl_.lengths);
      plen_->read_vlen_int32(begin, count, plen_->values, plen_->lengths);
      pmlen_->read_vlen_int32(begin, count, pmlen_->values, pmlen_->lengths);
    } else {
      nsl_.read_int32(begin, count, nsl_.values);
    }
    int64_t tok = 0, pred = 0, seqs = 0;
    for (int64_t r = 0; r < count; ++r) {
      const int64_t n_tok = ids_.lengths[r], n_pred = pos_.lengths[r];
      const SequenceRef row_ref{header_.file, begin + r, -1, packed_};
      if (seg_.lengths[r] != n_tok) {
        fail_sequence(row_ref, "segment_ids",
                      "has " + std::to_string(seg_.lengths[r]) + " values but 'input_ids' has " +
                          std::to_string(n_tok) + ": inconsistent lengths");
      }
      if (mid_.lengths[r] != n_pred) {
        fail_sequence(row_ref, "masked_lm_ids",
                      "has " + std::to_string(mid_.lengths[r]) + " values but 'masked_lm_positions' has " +
                          std::to_string(n_pred) + ": inconsistent lengths");
      }
      if (packed_) {
        decode_packed_row(row_ref, r, tok, pred, seqs, out);
        seqs += plen_->lengths[r];
      } else {
        SequenceView seq;
        seq.input_ids = ids_.values.data() + tok;
        seq.segment_ids = seg_.values.data() + tok;
        seq.tokens = n_tok;
        seq.masked_lm_positions = pos_.values.data() + pred;
        seq.masked_lm_ids = mid_.values.data() + pred;
        seq.predictions = n_pred;
        seq.next_sentence_label = nsl_.values[r];
        append_checked(row_ref, seq, limits_, out);
      }
      tok += n_tok;
      pred += n_pred;
    }
  }

 private:
  struct Column : H5Dataset {
    using H5Dataset::H5Dataset;
    std::vector<int32_t> values;
    std::vector<int64_t> lengths;
  };

  // Splits row r (whose tokens start at values[tok], predictions at values[pred], and whose
  // per-sequence entries start at seq0 in the packed_* and next_sentence_labels columns).
  void decode_packed_row(const SequenceRef& row_ref, int64_t r, int64_t tok, int64_t pred, int64_t seq0,
                         ShardSamples& out) {
    const int64_t k = plen_->lengths[r];
    if (pmlen_->lengths[r] != k || nsl_.lengths[r] != k) {
      fail_sequence(row_ref, pmlen_->lengths[r] != k ? "packed_masked_lm_len" : "next_sentence_labels",
                    "has " + std::to_string(pmlen_->lengths[r] != k ? pmlen_->lengths[r] : nsl_.lengths[r]) +
                        " entries but 'packed_input_len' has " + std::to_string(k) + ": inconsistent lengths");
    }
    const int32_t* lens = plen_->values.data() + seq0;
    const int32_t* mlens = pmlen_->values.data() + seq0;
    for (int64_t s = 0; s < k; ++s) {
      if (lens[s] < 0 || mlens[s] < 0) {
        fail_sequence(SequenceRef{header_.file, row_ref.row, static_cast<int>(s), true},
                      lens[s] < 0 ? "packed_input_len" : "packed_masked_lm_len", "negative length");
      }
    }
    const int64_t tok_sum = std::accumulate(lens, lens + k, int64_t{0});
    const int64_t pred_sum = std::accumulate(mlens, mlens + k, int64_t{0});
    if (tok_sum != ids_.lengths[r]) {
      fail_sequence(row_ref, "packed_input_len",
                    "sums to " + std::to_string(tok_sum) + " but 'input_ids' has " + std::to_string(ids_.lengths[r]) +
                        " tokens: inconsistent lengths");
    }
    if (pred_sum != pos_.lengths[r]) {
      fail_sequence(row_ref, "packed_masked_lm_len",
                    "sums to " + std::to_string(pred_sum) + " but 'masked_lm_positions' has " +
                        std::to_string(pos_.lengths[r]) + " entries: inconsistent lengths");
    }
    int64_t offset = 0, p0 = 0;
    for (int64_t s = 0; s < k; ++s) {
      const SequenceRef ref{header_.file, row_ref.row, static_cast<int>(s), true};
      rebased_.resize(static_cast<size_t>(mlens[s]));
      for (int64_t p = 0; p < mlens[s]; ++p) {
        const int64_t raw = pos_.values[pred + p0 + p];
        if (raw <= offset || raw >= offset + lens[s]) {
          fail_sequence(ref, "masked_lm_positions",
                        "position " + std::to_string(raw) + " lies outside this sequence's tokens [" +
                            std::to_string(offset + 1) + ", " + std::to_string(offset + lens[s]) +
                            ") of the packed row");
        }
        rebased_[p] = static_cast<int32_t>(raw - offset);
      }
      SequenceView seq;
      seq.input_ids = ids_.values.data() + tok + offset;
      seq.segment_ids = seg_.values.data() + tok + offset;
      seq.tokens = lens[s];
      seq.masked_lm_positions = rebased_.data();
      seq.masked_lm_ids = mid_.values.data() + pred + p0;
      seq.predictions = mlens[s];
      seq.next_sentence_label = nsl_.values[seq0 + s];
      append_checked(ref, seq, limits_, out);
      offset += lens[s];
      p0 += mlens[s];
    }
  }

  ShardHeader header_;
  ShardLimits limits_;
  bool packed_;
  Column ids_, seg_, pos_, mid_, nsl_;
  std::optional<Column> plen_, pmlen_;
  std::vector<int32_t> rebased_;
};

}  // namespace

std::unique_ptr<RowDecoder> make_mlperf_decoder(hid_t file, const ShardHeader& header, const ShardLimits& limits) {
  return std::make_unique<MlperfDecoder>(file, header, limits);
}

}  // namespace bert
