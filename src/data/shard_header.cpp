// Format detection and header validation of a shard: which keys must exist in each format,
// their dtype classes (any integer width is accepted and converted on read) and their shapes,
// so a wrong file is rejected when the data source is built, before any training step.
#include <vector>

#include "data/h5_dataset.h"
#include "data/shard_decoders.h"

namespace bert {
namespace {

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "float";
    case H5T_STRING:
      return "string";
    case H5T_VLEN:
      return "variable-length";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    default:
      return "other";
  }
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

ShardFormat resolve_format(hid_t file, const std::string& path, const std::string& format) {
  if (format == "dle") return ShardFormat::dle;
  if (format == "mlperf") return ShardFormat::mlperf;
  if (format == "mlperf_packed") return ShardFormat::mlperf_packed;
  if (format != "auto") {
    fail(Code::config, "unknown data format '", format, "' (expected auto, dle, mlperf or mlperf_packed)");
  }
  if (h5_has_dataset(file, "input_mask")) return ShardFormat::dle;
  if (h5_has_dataset(file, "packed_input_len")) return ShardFormat::mlperf_packed;
  if (!h5_has_dataset(file, "input_ids")) {
    fail(Code::data, "shard '", path, "' has no dataset 'input_ids': not a BERT pretraining shard");
  }
  return ShardFormat::mlperf;
}

// An integer dataset of rank 1 ([N]) or, when `width` is given, rank 2 ([N, width]).
// A rank-1 dataset may also be stored as [N, 1].
void expect_fixed(const H5Dataset& d, bool rank2) {
  if (d.type_class() != H5T_INTEGER) {
    fail(Code::data, d.where(), " has dtype class '", class_name(d.type_class()),
         "'; expected a fixed-width integer type");
  }
  const auto& dims = d.dims();
  const bool ok = rank2 ? dims.size() == 2 : (dims.size() == 1 || (dims.size() == 2 && dims[1] == 1));
  if (!ok) {
    fail(Code::data, d.where(), " has shape ", shape_text(dims), "; expected ", rank2 ? "[N, width]" : "[N]");
  }
}

void expect_vlen(const H5Dataset& d) {
  if (d.type_class() != H5T_VLEN || d.base_class() != H5T_INTEGER) {
    fail(Code::data, d.where(), " has dtype class '", class_name(d.type_class()),
         d.type_class() == H5T_VLEN ? std::string(" of ") + class_name(d.base_class()) : std::string(),
         "'; expected variable-length integers (the MLPerf format stores one integer array per sample)");
  }
  if (d.dims().size() != 1) fail(Code::data, d.where(), " has shape ", shape_text(d.dims()), "; expected [N]");
}

void expect_rows(const H5Dataset& d, const H5Dataset& ref) {
  if (d.dims()[0] != ref.dims()[0]) {
    fail(Code::data, d.where(), " has ", d.dims()[0], " rows but '", ref.key(), "' has ", ref.dims()[0],
         ": inconsistent lengths");
  }
}

void expect_width(const H5Dataset& d, const H5Dataset& ref) {
  if (d.dims()[1] != ref.dims()[1]) {
    fail(Code::data, d.where(), " has shape ", shape_text(d.dims()), " but '", ref.key(), "' has ",
         shape_text(ref.dims()), ": inconsistent lengths");
  }
}

}  // namespace

const char* format_name(ShardFormat format) {
  switch (format) {
    case ShardFormat::dle:
      return "dle";
    case ShardFormat::mlperf:
      return "mlperf";
    default:
      return "mlperf_packed";
  }
}

ShardHeader read_shard_header(hid_t file, const std::string& path, const ShardLimits& limits,
                              const std::string& format) {
  ShardHeader h;
  h.file = path;
  h.format = resolve_format(file, path, format);
  if (h.format == ShardFormat::dle) {
    H5Dataset ids(file, path, "input_ids"), mask(file, path, "input_mask"), seg(file, path, "segment_ids");
    H5Dataset pos(file, path, "masked_lm_positions"), mid(file, path, "masked_lm_ids");
    H5Dataset nsl(file, path, "next_sentence_labels");
    for (const H5Dataset* d : {&ids, &mask, &seg, &pos, &mid}) expect_fixed(*d, true);
    expect_fixed(nsl, false);
    for (const H5Dataset* d : {&mask, &seg, &pos, &mid, &nsl}) expect_rows(*d, ids);
    expect_width(mask, ids);
    expect_width(seg, ids);
    expect_width(mid, pos);
    h.rows = static_cast<int64_t>(ids.dims()[0]);
    h.seq_width = static_cast<int64_t>(ids.dims()[1]);
    h.pred_width = static_cast<int64_t>(pos.dims()[1]);
    if (h.seq_width > limits.max_seq_length) {
      fail(Code::data, ids.where(), " has shape ", shape_text(ids.dims()), ": sequences of ", h.seq_width,
           " tokens, longer than max_seq_length ", limits.max_seq_length);
    }
    if (h.pred_width > limits.max_predictions_per_seq) {
      fail(Code::data, pos.where(), " has shape ", shape_text(pos.dims()), ": up to ", h.pred_width,
           " predictions per sequence, more than max_predictions_per_seq ", limits.max_predictions_per_seq);
    }
    return h;
  }

  H5Dataset ids(file, path, "input_ids"), seg(file, path, "segment_ids");
  H5Dataset pos(file, path, "masked_lm_positions"), mid(file, path, "masked_lm_ids");
  H5Dataset nsl(file, path, "next_sentence_labels");
  for (const H5Dataset* d : {&ids, &seg, &pos, &mid}) expect_vlen(*d);
  for (const H5Dataset* d : {&seg, &pos, &mid}) expect_rows(*d, ids);
  if (h.format == ShardFormat::mlperf_packed) {
    H5Dataset plen(file, path, "packed_input_len"), pmlen(file, path, "packed_masked_lm_len");
    for (const H5Dataset* d : {&nsl, &plen, &pmlen}) {
      expect_vlen(*d);
      expect_rows(*d, ids);
    }
  } else {
    expect_fixed(nsl, false);
    expect_rows(nsl, ids);
  }
  h.rows = static_cast<int64_t>(ids.dims()[0]);
  return h;
}

}  // namespace bert
