// TFRecord -> DLE/MLPerf shards: each Example becomes one unpadded instance of an InstanceBuffer,
// written by write_shard.
#include "prep/tfrecord_shards.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "prep/tfrecord.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> inside;
      for (const auto& e : fs::directory_iterator(in, ec)) {
        if (e.is_regular_file()) inside.push_back(e.path().string());
      }
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (fs::exists(in, ec)) {
      files.push_back(in);
    } else {
      fail(Code::io, "TFRecord input '", in, "' does not exist");
    }
  }
  if (files.empty()) fail(Code::invalid_argument, "no TFRecord files among the inputs");
  return files;
}

class ExampleChecker {
 public:
  ExampleChecker(const Example& example, std::string context) : ex_(example), context_(std::move(context)) {}

  const ExampleFeature& feature(const char* name, ExampleFeature::Kind kind) const {
    auto it = ex_.find(name);
    if (it == ex_.end()) fail(Code::data, context_, " has no feature '", name, "'");
    if (it->second.kind != kind) {
      fail(Code::data, context_, " feature '", name, "' is a ", it->second.kind_name(), " list");
    }
    return it->second;
  }
  const std::vector<int64_t>& ints(const char* name, size_t size) const {
    const ExampleFeature& f = feature(name, ExampleFeature::Kind::int64s);
    if (f.int64s.size() != size) fail(Code::data, context_, " feature '", name, "' has ", f.int64s.size(), " values, expected ", size);
    return f.int64s;
  }
  [[noreturn]] void bad(const char* name, const std::string& why) const {
    fail(Code::data, context_, " feature '", name, "' ", why);
  }

 private:
  const Example& ex_;
  std::string context_;
};

// Appends one Example to `out`; sets L and P from the first record of the run.
void append_instance(const Example& ex, const std::string& context, int& L, int& P, bool mlperf, InstanceBuffer& out,
                     TfRecordConvertSummary& sum) {
  ExampleChecker check(ex, context);
  if (L == 0) {
    L = static_cast<int>(check.feature("input_ids", ExampleFeature::Kind::int64s).size());
    P = static_cast<int>(check.feature("masked_lm_positions", ExampleFeature::Kind::int64s).size());
    if (L < 2) check.bad("input_ids", "has " + std::to_string(L) + " values");
  }
  const auto& ids = check.ints("input_ids", L);
  const auto& mask = check.ints("input_mask", L);
  const auto& segments = check.ints("segment_ids", L);
  const auto& positions = check.ints("masked_lm_positions", P);
  const auto& labels = check.ints("masked_lm_ids", P);
  const auto& next = check.ints("next_sentence_labels", 1);

  size_t n = 0;
  while (n < mask.size() && mask[n] == 1) ++n;
  for (size_t t = n; t < mask.size(); ++t) {
    if (mask[t] != 0) check.bad("input_mask", "is not a run of ones followed by zeros (value " + std::to_string(mask[t]) + " at " + std::to_string(t) + ")");
  }
  if (n == 0) check.bad("input_mask", "marks no tokens");
  size_t a = 0;
  while (a < n && segments[a] == 0) ++a;
  for (size_t t = a; t < n; ++t) {
    if (segments[t] != 1) check.bad("segment_ids", "is not 0...0 1...1 over the sequence (value " + std::to_string(segments[t]) + " at " + std::to_string(t) + ")");
  }
  size_t k = P;
  auto w = ex.find("masked_lm_weights");
  if (w != ex.end()) {
    const ExampleFeature& weights = check.feature("masked_lm_weights", ExampleFeature::Kind::floats);
    if (weights.floats.size() != static_cast<size_t>(P)) check.bad("masked_lm_weights", "has " + std::to_string(weights.floats.size()) + " values, expected " + std::to_string(P));
    k = 0;
    while (k < weights.floats.size() && weights.floats[k] == 1.0f) ++k;
    for (size_t j = k; j < weights.floats.size(); ++j) {
      if (weights.floats[j] != 0.0f) check.bad("masked_lm_weights", "is not ones followed by zeros");
    }
  }
  const int64_t id_limit = mlperf ? 32767 : 2147483647;  // the MLPerf layout stores int16 ids
  for (size_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] > id_limit) check.bad("input_ids", "holds " + std::to_string(ids[t]) + (mlperf ? ", beyond the MLPerf layout's int16" : ""));
    out.input_ids.push_back(static_cast<int32_t>(ids[t]));
  }
  for (size_t j = 0; j < k; ++j) {
    if (positions[j] < 0 || static_cast<size_t>(positions[j]) >= n) check.bad("masked_lm_positions", "holds " + std::to_string(positions[j]) + " outside the sequence of " + std::to_string(n) + " tokens");
    if (j > 0 && positions[j] <= positions[j - 1]) check.bad("masked_lm_positions", "is not ascending");
    if (labels[j] < 0 || labels[j] > id_limit) check.bad("masked_lm_ids", "holds " + std::to_string(labels[j]));
    out.positions.push_back(static_cast<int32_t>(positions[j]));
    out.labels.push_back(static_cast<int32_t>(labels[j]));
  }
  if (next[0] != 0 && next[0] != 1) check.bad("next_sentence_labels", "is " + std::to_string(next[0]) + ", not 0 or 1");
  out.token_offsets.push_back(out.input_ids.size());
  out.segment_a_length.push_back(static_cast<uint16_t>(a));
  out.mask_offsets.push_back(out.positions.size());
  out.random_next.push_back(static_cast<uint8_t>(next[0]));
  sum.tokens += n;
  sum.predictions += k;
}

}  // namespace

TfRecordConvertSummary convert_tfrecords(const std::vector<std::string>& inputs, const TfRecordConvertOptions& o) {
  TfRecordConvertSummary sum;
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) fail(Code::io, "cannot create output directory '", o.output_dir, "': ", ec.message());
  std::set<std::string> outputs;
  const bool mlperf = o.format == ShardOutputFormat::mlperf;
  for (const std::string& file : expand_inputs(inputs)) {
    const std::string out_path = (fs::path(o.output_dir) / (fs::path(file).filename().string() + ".hdf5")).string();
    if (!outputs.insert(out_path).second) fail(Code::invalid_argument, "two inputs would both write '", out_path, "'");
    if (!o.overwrite && fs::exists(out_path, ec)) fail(Code::io, "'", out_path, "' exists (use --overwrite)");
    TfRecordReader reader(file);
    InstanceBuffer buffer;
    std::string record;
    int L = sum.max_seq_length, P = sum.max_predictions;
    while (reader.next(record)) {
      const std::string context = "TFRecord file '" + file + "' record " + std::to_string(reader.records_read() - 1);
      append_instance(parse_example(record, context), context, L, P, mlperf, buffer, sum);
    }
    if (buffer.size() == 0) fail(Code::data, "TFRecord file '", file, "' holds no records");
    sum.max_seq_length = L;
    sum.max_predictions = P;
    std::vector<uint32_t> order(buffer.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    ShardWriteOptions w;
    w.format = o.format;
    w.max_seq_length = L;
    w.max_predictions = P;
    w.gzip_level = o.gzip_level;
    sum.bytes_written += write_shard(out_path, buffer, order, w);
    sum.records += buffer.size();
    ++sum.files;
    sum.outputs.push_back(out_path);
  }
  return sum;
}

}  // namespace bert
