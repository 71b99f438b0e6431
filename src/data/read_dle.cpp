// Decoder of the DLE fixed-width shard format: input_ids/input_mask/segment_ids [N, L],
// masked_lm_positions/masked_lm_ids [N, P], next_sentence_labels [N]. A sequence's real tokens
// are the leading run of input_mask == 1; its predictions end at the first 0 in
// masked_lm_positions (DLE's rule for rebuilding the masked labels).
#include <algorithm>
#include <vector>

#include "data/h5_dataset.h"
#include "data/shard_decoders.h"

namespace bert {
namespace {

class DleDecoder : public RowDecoder {
 public:
  DleDecoder(hid_t file, const ShardHeader& h, const ShardLimits& limits)
      : header_(h),
        limits_(limits),
        ids_(file, h.file, "input_ids"),
        mask_(file, h.file, "input_mask"),
        seg_(file, h.file, "segment_ids"),
        pos_(file, h.file, "masked_lm_positions"),
        mid_(file, h.file, "masked_lm_ids"),
        nsl_(file, h.file, "next_sentence_labels") {
    const int64_t row_bytes = std::max<int64_t>(1, h.seq_width) * 4;
    band_ = std::max<int64_t>(1, (int64_t{1} << 20) / row_bytes);  // ~1 MiB of input_ids per band
    const int64_t chunk = static_cast<int64_t>(ids_.chunk_rows());
    if (chunk > 0) band_ = (band_ + chunk - 1) / chunk * chunk;
  }

  int64_t band_rows() const override { return band_; }

  void read_rows(int64_t begin, int64_t count, ShardSamples& out) override {
    const int64_t L = header_.seq_width, P = header_.pred_width;
    ids_.read_int32(begin, count, ids_buf_);    // [count, L]
    mask_.read_int32(begin, count, mask_buf_);  // [count, L]
    seg_.read_int32(begin, count, seg_buf_);    // [count, L]
    pos_.read_int32(begin, count, pos_buf_);    // [count, P]
    mid_.read_int32(begin, count, mid_buf_);    // [count, P]
    nsl_.read_int32(begin, count, nsl_buf_);    // [count]
    for (int64_t r = 0; r < count; ++r) {
      const SequenceRef ref{header_.file, begin + r};
      const int32_t* mask = mask_buf_.data() + r * L;
      int64_t tokens = 0;
      while (tokens < L && mask[tokens] == 1) ++tokens;
      for (int64_t t = tokens; t < L; ++t) {
        if (mask[t] != 0) {
          fail_sequence(ref, "input_mask",
                        "value " + std::to_string(mask[t]) + " at position " + std::to_string(t) +
                            ": the mask must be a run of 1s followed by 0s");
        }
      }
      const int32_t* pos = pos_buf_.data() + r * P;
      const int64_t predictions = std::find(pos, pos + P, 0) - pos;
      SequenceView seq;
      seq.input_ids = ids_buf_.data() + r * L;
      seq.segment_ids = seg_buf_.data() + r * L;
      seq.tokens = tokens;
      seq.masked_lm_positions = pos;
      seq.masked_lm_ids = mid_buf_.data() + r * P;
      seq.predictions = predictions;
      seq.next_sentence_label = nsl_buf_[r];
      append_checked(ref, seq, limits_, out);
    }
  }

 private:
  ShardHeader header_;
  ShardLimits limits_;
  H5Dataset ids_, mask_, seg_, pos_, mid_, nsl_;
  int64_t band_ = 1;
  std::vector<int32_t> ids_buf_, mask_buf_, seg_buf_, pos_buf_, mid_buf_, nsl_buf_;
};

}  // namespace

std::unique_ptr<RowDecoder> make_dle_decoder(hid_t file, const ShardHeader& header, const ShardLimits& limits) {
  return std::make_unique<DleDecoder>(file, header, limits);
}

}  // namespace bert
