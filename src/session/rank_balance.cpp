// balance_across_ranks: pool, greedy longest-first deal, deterministic on every rank.
#include "session/rank_balance.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace bert {
namespace {

// The six DLE fields, in a fixed order, as (array, values per sample).
std::vector<std::pair<std::vector<int32_t>*, int>> fields(HostBatch& b) {
  return {{&b.input_ids, b.seq_length},           {&b.segment_ids, b.seq_length},
          {&b.input_mask, b.seq_length},          {&b.masked_lm_positions, b.max_predictions},
          {&b.masked_lm_ids, b.max_predictions},  {&b.next_sentence_labels, 1}};
}

std::string serialize(const HostBatch& batch) {
  HostBatch b = batch;
  std::string out;
  const int32_t shape[3] = {b.batch_size, b.seq_length, b.max_predictions};
  out.append(reinterpret_cast<const char*>(shape), sizeof shape);
  for (auto& [array, width] : fields(b)) out.append(reinterpret_cast<const char*>(array->data()), array->size() * 4);
  return out;
}

HostBatch deserialize(const std::string& bytes) {
  int32_t shape[3];
  BERT_CHECK(bytes.size() >= sizeof shape, Code::distributed, "rank balancing received a malformed batch");
  std::memcpy(shape, bytes.data(), sizeof shape);
  HostBatch b;
  b.resize(shape[0], shape[1], shape[2]);
  size_t at = sizeof shape;
  for (auto& [array, width] : fields(b)) {
    BERT_CHECK(at + array->size() * 4 <= bytes.size(), Code::distributed, "rank balancing received a truncated batch");
    std::memcpy(array->data(), bytes.data() + at, array->size() * 4);
    at += array->size() * 4;
  }
  return b;
}

}  // namespace

HostBatch balance_across_ranks(const HostBatch& mine, Communicator& comm) {
  const int world = comm.world_size();
  if (world == 1) return mine;
  std::vector<HostBatch> all;
  for (const std::string& bytes : comm.allgather_text(serialize(mine))) all.push_back(deserialize(bytes));
  const int B = mine.batch_size, S = mine.seq_length, P = mine.max_predictions;
  for (const HostBatch& b : all) {
    BERT_CHECK(b.batch_size == B && b.seq_length == S && b.max_predictions == P, Code::distributed,
               "rank balancing needs micro-batches of the same shape on every rank");
  }

  struct Sample {
    int rank, index;
    int64_t tokens;
  };
  std::vector<Sample> samples;
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < B; ++i) {
      const int32_t* mask = &all[r].input_mask[static_cast<size_t>(i) * S];
      samples.push_back({r, i, std::accumulate(mask, mask + S, int64_t{0})});
    }
  }
  std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.tokens > b.tokens; });
  std::vector<int64_t> load(world, 0);
  std::vector<int> count(world, 0);
  std::vector<Sample> dealt;  // this rank's samples
  for (const Sample& s : samples) {
    int target = -1;
    for (int g = 0; g < world; ++g) {
      if (count[g] < B && (target < 0 || load[g] < load[target])) target = g;
    }
    load[target] += s.tokens;
    ++count[target];
    if (target == comm.rank()) dealt.push_back(s);
  }

  HostBatch out;
  out.resize(B, S, P);
  auto out_fields = fields(out);
  for (int j = 0; j < B; ++j) {
    auto in_fields = fields(all[dealt[j].rank]);
    for (size_t f = 0; f < out_fields.size(); ++f) {
      const int width = out_fields[f].second;
      std::memcpy(out_fields[f].first->data() + static_cast<size_t>(j) * width,
                  in_fields[f].first->data() + static_cast<size_t>(dealt[j].index) * width, width * sizeof(int32_t));
    }
  }
  return out;
}

}  // namespace bert
