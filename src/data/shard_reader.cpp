// ShardReader: opens a shard, validates its header, and hands bands of rows to the decoder of
// its format. read_shard and inspect_shard are the whole-file conveniences built on it.
#include "data/shard_reader.h"

#include <algorithm>

#include "data/h5_dataset.h"
#include "data/shard_decoders.h"

namespace bert {

struct ShardReader::Impl {
  Hdf5Id file;
  ShardHeader header;
  std::unique_ptr<RowDecoder> decoder;
};

ShardReader::ShardReader(const std::string& path, const ShardLimits& limits, const std::string& format)
    : impl_(std::make_unique<Impl>()) {
  impl_->file = open_h5_file(path);
  impl_->header = read_shard_header(impl_->file.get(), path, limits, format);
  impl_->decoder = impl_->header.format == ShardFormat::dle
                       ? make_dle_decoder(impl_->file.get(), impl_->header, limits)
                       : make_mlperf_decoder(impl_->file.get(), impl_->header, limits);
}

ShardReader::~ShardReader() = default;

const ShardHeader& ShardReader::header() const { return impl_->header; }

int64_t ShardReader::band_rows() const { return impl_->decoder->band_rows(); }

void ShardReader::read_rows(int64_t begin, int64_t count, ShardSamples& out) {
  BERT_CHECK(begin >= 0 && count >= 0 && begin + count <= impl_->header.rows, Code::internal, "rows [", begin, ", ",
             begin + count, ") outside shard '", impl_->header.file, "' of ", impl_->header.rows, " rows");
  out.file = impl_->header.file;
  impl_->decoder->read_rows(begin, count, out);
  // After a shard's first band, reserve what the whole shard will need (extrapolated, +2%), so
  // the arrays are not regrown by doubling: that would hold up to 3x a shard at a time.
  const int64_t done = begin + count, rows = impl_->header.rows;
  if (begin == 0 && done > 0 && done < rows) {
    const double scale = 1.02 * static_cast<double>(rows) / static_cast<double>(done);
    auto reserve = [scale](auto& v) { v.reserve(static_cast<size_t>(static_cast<double>(v.size()) * scale) + 16); };
    reserve(out.token_begin);
    reserve(out.input_ids);
    reserve(out.segment_ids);
    reserve(out.pred_begin);
    reserve(out.masked_lm_positions);
    reserve(out.masked_lm_ids);
    reserve(out.next_sentence_labels);
  }
}

ShardHeader inspect_shard(const std::string& path, const ShardLimits& limits, const std::string& format) {
  Hdf5Id file = open_h5_file(path);
  return read_shard_header(file.get(), path, limits, format);
}

ShardSamples read_shard(const std::string& path, const ShardLimits& limits, const std::string& format) {
  ShardReader reader(path, limits, format);
  ShardSamples out;
  const int64_t rows = reader.header().rows, band = reader.band_rows();
  for (int64_t r = 0; r < rows; r += band) reader.read_rows(r, std::min(band, rows - r), out);
  out.file = path;
  return out;
}

}  // namespace bert
