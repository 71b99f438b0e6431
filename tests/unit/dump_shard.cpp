// Test helper for tests/oracle/test_shard_reader.py: prints, as JSON, what the C++ data
// pipeline decodes, so Python can compare it with what h5py wrote.
//   dump_shard read FILE --seq L --pred P --vocab V [--format F]    every sample, padded like a batch row
//   dump_shard plan --files N --seed S --epoch E --rank R --world W   the epoch's file order and slots
//   dump_shard shuffle --n N --seed S --epoch E --file F              a shard's sample permutation
//   dump_shard source PATH --seq L --pred P --vocab V --batch B --batches K [--seed S --rank R
//                     --world W --bins N --skip-bad]                  K batches and the cursor after each
// Errors print "error: <message>" on stderr and exit with status 2.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/sample_order.h"
#include "data/shard_plan.h"
#include "data/shard_reader.h"
#include "data/shard_source.h"

namespace {

using nlohmann::json;

struct Args {
  std::string mode, target;
  std::map<std::string, std::string> named;
  long num(const std::string& key, long fallback) const {
    auto it = named.find(key);
    return it == named.end() ? fallback : std::stol(it->second);
  }
  std::string str(const std::string& key, const std::string& fallback) const {
    auto it = named.find(key);
    return it == named.end() ? fallback : it->second;
  }
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw bert::Error(bert::Code::invalid_argument, "usage: dump_shard read|plan|shuffle|source ...");
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view s = argv[i];
    if (s == "--skip-bad") {
      a.named.emplace("skip-bad", "1");
    } else if (s.substr(0, 2) == "--" && i + 1 < argc) {
      a.named.emplace(std::string(s.substr(2)), argv[i + 1]);
      ++i;
    } else {
      a.target = std::string(s);
    }
  }
  return a;
}

// Row b of a batch as JSON, with the masked-LM labels rebuilt by DLE's rule: -1 everywhere
// except at the masked positions, which stop at the first 0 in masked_lm_positions.
json row_json(const bert::HostBatch& batch, int b) {
  const int S = batch.seq_length, P = batch.max_predictions;
  auto slice = [](const std::vector<int32_t>& v, size_t begin, size_t n) {
    return std::vector<int32_t>(v.begin() + begin, v.begin() + begin + n);
  };
  json j;
  j["input_ids"] = slice(batch.input_ids, static_cast<size_t>(b) * S, S);
  j["segment_ids"] = slice(batch.segment_ids, static_cast<size_t>(b) * S, S);
  j["input_mask"] = slice(batch.input_mask, static_cast<size_t>(b) * S, S);
  j["masked_lm_positions"] = slice(batch.masked_lm_positions, static_cast<size_t>(b) * P, P);
  j["masked_lm_ids"] = slice(batch.masked_lm_ids, static_cast<size_t>(b) * P, P);
  j["next_sentence_label"] = batch.next_sentence_labels[b];
  std::vector<int32_t> labels(S, -1);
  for (int p = 0; p < P; ++p) {
    const int32_t pos = batch.masked_lm_positions[static_cast<size_t>(b) * P + p];
    if (pos == 0) break;
    labels[pos] = batch.masked_lm_ids[static_cast<size_t>(b) * P + p];
  }
  j["masked_lm_labels"] = labels;
  return j;
}

json dump_read(const Args& a) {
  const bert::ShardLimits limits{static_cast<int>(a.num("seq", 128)), static_cast<int>(a.num("pred", 20)),
                                 static_cast<int>(a.num("vocab", 30522))};
  const std::string format = a.str("format", "auto");
  const bert::ShardHeader header = bert::inspect_shard(a.target, limits, format);
  const bert::ShardSamples samples = bert::read_shard(a.target, limits, format);
  bert::HostBatch row;
  row.resize(1, limits.max_seq_length, limits.max_predictions_per_seq);
  json out;
  out["format"] = bert::format_name(header.format);
  out["rows"] = header.rows;
  out["samples"] = json::array();
  for (size_t i = 0; i < samples.size(); ++i) {
    samples.copy_to(i, row, 0);
    out["samples"].push_back(row_json(row, 0));
  }
  return out;
}

json dump_plan(const Args& a) {
  const auto n = static_cast<uint32_t>(a.num("files", 1));
  const auto seed = static_cast<uint64_t>(a.num("seed", 0)), epoch = static_cast<uint64_t>(a.num("epoch", 0));
  json out;
  out["order"] = bert::epoch_file_order(n, seed, epoch, true);
  out["slots"] = json::array();
  for (const bert::ShardSlot& s : bert::epoch_slots(n, seed, epoch, static_cast<int>(a.num("rank", 0)),
                                                    static_cast<int>(a.num("world", 1)), true)) {
    out["slots"].push_back({{"file", s.file}, {"stride", s.stride}, {"offset", s.offset}});
  }
  return out;
}

json dump_shuffle(const Args& a) {
  return bert::shuffled_indices(static_cast<uint32_t>(a.num("n", 1)), static_cast<uint64_t>(a.num("seed", 0)),
                                static_cast<uint64_t>(a.num("epoch", 0)), static_cast<uint32_t>(a.num("file", 0)));
}

json dump_source(const Args& a) {
  bert::ShardSourceOptions o;
  o.path = a.target;
  o.format = a.str("format", "auto");
  o.max_seq_length = static_cast<int>(a.num("seq", 128));
  o.max_predictions_per_seq = static_cast<int>(a.num("pred", 20));
  o.vocab_size = static_cast<int>(a.num("vocab", 30522));
  o.seed = static_cast<uint64_t>(a.num("seed", 12345));
  o.rank = static_cast<int>(a.num("rank", 0));
  o.world = static_cast<int>(a.num("world", 1));
  o.bucket_bins = static_cast<int>(a.num("bins", 0));
  o.skip_bad_shards = a.named.count("skip-bad") > 0;
  auto source = bert::make_shard_source(o);
  const int B = static_cast<int>(a.num("batch", 1));
  json out = json::array();
  bert::HostBatch batch;
  for (long k = 0; k < a.num("batches", 1); ++k) {
    source->next(batch, B);
    json rows = json::array();
    for (int b = 0; b < B; ++b) rows.push_back(row_json(batch, b));
    out.push_back({{"rows", rows}, {"cursor", source->cursor()}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    json out;
    if (a.mode == "read") {
      out = dump_read(a);
    } else if (a.mode == "plan") {
      out = dump_plan(a);
    } else if (a.mode == "shuffle") {
      out = dump_shuffle(a);
    } else if (a.mode == "source") {
      out = dump_source(a);
    } else {
      throw bert::Error(bert::Code::invalid_argument, "unknown mode '" + a.mode + "'");
    }
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
