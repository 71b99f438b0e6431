// Shard planning, the workers (work_queue.h), and per-shard instance creation.
#include "prep/shard_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "prep/progress.h"
#include "prep/work_queue.h"

namespace bert {
namespace fs = std::filesystem;
namespace {

struct ShardTask {
  bool eval = false;
  int index = 0;
  size_t begin = 0, end = 0;  // range in the shuffled document order
};

std::string shard_name(int index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05d.hdf5", index);
  return buf;
}

void prepare_dir(const fs::path& dir, bool overwrite) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(Code::io, "cannot create output directory '", dir.string(), "': ", ec.message());
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".hdf5" && ext != ".tmp") continue;
    if (!overwrite) {
      fail(Code::invalid_argument, "output directory '", dir.string(), "' already holds shards (",
           entry.path().filename().string(), "); pass --overwrite to replace them");
    }
    fs::remove(entry.path(), ec);
  }
}

void validate(const ShardBuildOptions& o, const Vocab& vocab) {
  const InstanceOptions& in = o.instances;
  if (in.max_seq_length < 5 || in.max_seq_length > 65535) {
    fail(Code::invalid_argument, "--max-seq-length ", in.max_seq_length, " must be in [5, 65535]");
  }
  if (in.max_predictions < 1 || in.max_predictions > in.max_seq_length) {
    fail(Code::invalid_argument, "--max-predictions ", in.max_predictions, " must be in [1, max_seq_length]");
  }
  if (!(in.masked_lm_prob > 0 && in.masked_lm_prob < 1)) fail(Code::invalid_argument, "--masked-lm-prob must be in (0, 1)");
  if (!(in.short_seq_prob >= 0 && in.short_seq_prob <= 1)) fail(Code::invalid_argument, "--short-seq-prob must be in [0, 1]");
  if (o.dupe_factor < 1) fail(Code::invalid_argument, "--dupe-factor must be >= 1");
  if (o.num_shards < 0 || o.eval_shards < 1) fail(Code::invalid_argument, "--shards and --eval-shards must be positive");
  if (!(o.eval_fraction >= 0 && o.eval_fraction < 1)) fail(Code::invalid_argument, "--eval-fraction must be in [0, 1)");
  if (o.write.format == ShardOutputFormat::mlperf && (vocab.size() > 32768 || in.max_seq_length > 32767)) {
    fail(Code::invalid_argument, "the MLPerf format stores int16 ids and positions: vocab '", vocab.origin(), "' has ",
         vocab.size(), " tokens (max 32768)");
  }
  if (o.output_dir.empty()) fail(Code::invalid_argument, "no output directory given (--output)");
}

// The shards to write: train shards over order[n_eval, n) and eval shards over order[0, n_eval),
// n_eval being eval_fraction of the documents (at least one, and one document left to train).
std::vector<ShardTask> plan_tasks(const ShardBuildOptions& o, const std::vector<DocumentRange>& docs,
                                  const std::vector<uint64_t>& order, int threads) {
  size_t n_eval = 0;
  if (o.eval_fraction > 0 && docs.size() >= 2) {
    n_eval = std::clamp<size_t>(static_cast<size_t>(std::llround(o.eval_fraction * static_cast<double>(docs.size()))), 1,
                                docs.size() - 1);
  }
  const size_t n_train = docs.size() - n_eval;
  uint64_t train_bytes = 0;
  for (size_t i = n_eval; i < docs.size(); ++i) train_bytes += docs[order[i]].end - docs[order[i]].begin;
  size_t shards = o.num_shards > 0 ? static_cast<size_t>(o.num_shards)
                                   : std::max<size_t>(static_cast<size_t>(threads), (train_bytes >> 25) + 1);
  shards = std::min(shards, n_train);
  const size_t eval_shards = std::min(static_cast<size_t>(o.eval_shards), n_eval);
  std::vector<ShardTask> tasks;
  for (size_t k = 0; k < shards; ++k) {
    tasks.push_back({false, static_cast<int>(k), n_eval + k * n_train / shards, n_eval + (k + 1) * n_train / shards});
  }
  for (size_t k = 0; k < eval_shards; ++k) {
    tasks.push_back({true, static_cast<int>(k), k * n_eval / eval_shards, (k + 1) * n_eval / eval_shards});
  }
  return tasks;
}

// What one shard adds to the summary.
struct ShardTotals {
  TokenizeCounts tokens;
  MaskCounts masks;
  uint64_t empty_documents = 0, sentences = 0, instances = 0, bytes_written = 0;

  void add_to(ShardBuildSummary& sum, const ShardTask& task) const {
    sum.tokens.add(tokens);
    sum.masks.masked += masks.masked;
    sum.masks.replaced_mask += masks.replaced_mask;
    sum.masks.kept += masks.kept;
    sum.masks.random += masks.random;
    sum.empty_documents += empty_documents;
    sum.sentences += sentences;
    sum.bytes_written += bytes_written;
    sum.empty_shards += instances == 0;
    (task.eval ? sum.eval_instances : sum.train_instances) += instances;
    ++(task.eval ? sum.eval_shards : sum.train_shards);
  }
};

// One worker's reader and buffers, reused from shard to shard.
class ShardWorker {
 public:
  ShardWorker(const ShardBuildOptions& o, const Tokenizer& tokenizer, const std::vector<CorpusFile>& files,
              const std::vector<DocumentRange>& docs, const std::vector<uint64_t>& order, Progress& progress)
      : o_(o), tokenizer_(tokenizer), reader_(files), docs_(docs), order_(order), progress_(progress) {}

  // Writes task t's shard into `out`: its documents tokenized, shuffled by the task's own random
  // stream, made into instances dupe_factor times, and the instances written in shuffled order.
  ShardTotals build(const ShardTask& task, size_t t, const fs::path& out) {
    ShardTotals totals;
    tokenize_documents(task, totals);
    PrepRandom rng(o_.seed, 1 + t);
    rng.shuffle(tdocs_);
    instances_ = InstanceBuffer{};
    for (int d = 0; d < o_.dupe_factor; ++d) {
      for (size_t i = 0; i < tdocs_.size(); ++i) {
        create_instances_from_document(tdocs_, i, o_.instances, tokenizer_.vocab(), rng, instances_, totals.masks);
      }
    }
    std::vector<uint32_t> perm(instances_.size());
    std::iota(perm.begin(), perm.end(), 0u);
    rng.shuffle(perm);
    const fs::path path = out / (task.eval ? "eval" : "train") / shard_name(task.index);
    totals.bytes_written = write_shard(path.string(), instances_, perm, o_.write);
    totals.instances = instances_.size();
    return totals;
  }

 private:
  // The task's documents as sentences of token ids into tdocs_ (documents without tokens counted,
  // not kept).
  void tokenize_documents(const ShardTask& task, ShardTotals& totals) {
    tdocs_.clear();
    for (size_t i = task.begin; i < task.end; ++i) {
      const DocumentRange& range = docs_[order_[i]];
      reader_.read(range, text_);
      document_sentences(text_, o_.sentences, sentences_);
      TokenizedDocument doc;
      for (std::string_view s : sentences_) {
        const size_t before = doc.tokens.size();
        tokenizer_.encode(s, doc.tokens, &totals.tokens);
        if (doc.tokens.size() > before) doc.sentence_ends.push_back(static_cast<uint32_t>(doc.tokens.size()));
      }
      totals.sentences += doc.sentences();
      if (doc.sentences() == 0) {
        ++totals.empty_documents;
      } else {
        tdocs_.push_back(std::move(doc));
      }
      progress_.add(range.end - range.begin, 1);
    }
  }

  const ShardBuildOptions& o_;
  const Tokenizer& tokenizer_;
  DocumentReader reader_;
  const std::vector<DocumentRange>& docs_;
  const std::vector<uint64_t>& order_;
  Progress& progress_;
  std::string text_;
  std::vector<std::string_view> sentences_;
  std::vector<TokenizedDocument> tdocs_;
  InstanceBuffer instances_;
};

// bert_prep_shards.json: the options the shards were made with and their counts.
void write_meta(const fs::path& out, const ShardBuildOptions& o, const Tokenizer& tokenizer,
                const ShardBuildSummary& sum) {
  nlohmann::json meta = {
      {"tool", "bert-prep shards"},
      {"vocab", tokenizer.vocab().origin()},
      {"vocab_size", tokenizer.vocab().size()},
      {"lower_case", tokenizer.options().lower_case},
      {"max_seq_length", o.instances.max_seq_length},
      {"max_predictions_per_seq", o.instances.max_predictions},
      {"masked_lm_prob", o.instances.masked_lm_prob},
      {"short_seq_prob", o.instances.short_seq_prob},
      {"whole_word_mask", o.instances.whole_word_mask},
      {"dupe_factor", o.dupe_factor},
      {"seed", o.seed},
      {"format", o.write.format == ShardOutputFormat::dle ? "dle" : "mlperf"},
      {"documents", sum.documents},
      {"train_shards", sum.train_shards},
      {"eval_shards", sum.eval_shards},
      {"train_instances", sum.train_instances},
      {"eval_instances", sum.eval_instances},
  };
  std::ofstream meta_file(out / "bert_prep_shards.json");
  meta_file << meta.dump(2) << "\n";
  if (!meta_file) fail(Code::io, "cannot write '", (out / "bert_prep_shards.json").string(), "'");
}

}  // namespace

ShardBuildSummary build_shards(const ShardBuildOptions& o, const Tokenizer& tokenizer) {
  validate(o, tokenizer.vocab());
  ShardBuildSummary sum;
  const std::vector<CorpusFile> files = list_corpus_files(o.inputs);
  sum.files = files.size();
  for (const CorpusFile& f : files) sum.input_bytes += f.size;
  const std::vector<DocumentRange> docs = index_documents(files, o.documents);
  sum.documents = docs.size();
  if (docs.empty()) fail(Code::data, "the input holds no documents (only blank lines or empty files)");

  std::vector<uint64_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  PrepRandom(o.seed, 0).shuffle(order);
  const int threads = resolve_threads(o.threads);
  const std::vector<ShardTask> tasks = plan_tasks(o, docs, order, threads);
  const fs::path out(o.output_dir);
  prepare_dir(out / "train", o.overwrite);
  if (std::any_of(tasks.begin(), tasks.end(), [](const ShardTask& t) { return t.eval; })) {
    prepare_dir(out / "eval", o.overwrite);
  }

  uint64_t doc_bytes = 0;
  for (const DocumentRange& d : docs) doc_bytes += d.end - d.begin;
  Progress progress("shards", doc_bytes);
  std::mutex sum_mutex;
  run_workers(threads, tasks.size(), 1, [&](size_t, BlockQueue& queue) {
    ShardWorker worker(o, tokenizer, files, docs, order, progress);
    for (size_t t, end; queue.next(t, end);) {
      const ShardTotals totals = worker.build(tasks[t], t, out);
      std::lock_guard<std::mutex> lock(sum_mutex);
      totals.add_to(sum, tasks[t]);
    }
  });
  sum.seconds = progress.finish();
  write_meta(out, o, tokenizer, sum);
  return sum;
}

}  // namespace bert
