// bert-prep: raw text -> BERT pretraining shards. A thin command-line front over src/data/:
//   tokenize  text -> WordPiece tokens or ids (also a throughput benchmark)
//   vocab     learn a WordPiece vocabulary from a corpus
//   wiki      a Wikipedia dump (.xml, .xml.bz2) -> plain-text articles (WikiExtractor's job)
//   shards    create_pretraining_data: text (or a dump) -> DLE (or MLPerf variable-length) HDF5 shards
//   from-tfrecord  TFRecords of tf.train.Example (Google / MLPerf) -> DLE or MLPerf shards
//   inspect   statistics and decoded samples of a shard
//   bins      split existing shards into length bins (Samsung's MLPerf recipe)
//   eval-set  a fixed number of sequences drawn from held-out shards (MLPerf's eval set)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command_line.h"
#include "core/error.h"
#include "prep/progress.h"
#include "prep/shard_builder.h"
#include "prep/shard_inspect.h"
#include "prep/shard_rewrite.h"
#include "prep/text_corpus.h"
#include "prep/tfrecord_shards.h"
#include "prep/wiki_dump.h"
#include "prep/wiki_extract.h"
#include "prep/work_queue.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "prep/vocab_trainer.h"

namespace {

using namespace bert;

constexpr const char* kUsage = R"(usage: bert-prep COMMAND [options]

commands:
  tokenize --vocab FILE [INPUT...]        text (files or '-' for stdin) -> one line of tokens per line
      --ids                               print ids instead of tokens
      --cased | --uncased                 default: cased if the vocab has upper-case tokens
      --max-word-chars N                  longer words become [UNK] (default 100; Google's code: 200)
      --benchmark                         measure throughput (1 thread and --threads) instead of printing
      --threads N  --min-seconds S  --json
  vocab --size N --output FILE INPUT...   learn a WordPiece vocab (BERT layout: [PAD]=0 [UNK]=100
                                          [CLS]=101 [SEP]=102 [MASK]=103)
      --cased  --min-frequency N (2)  --limit-alphabet N (1000)  --threads N
  wiki --output DIR DUMP...               Wikipedia dump (.xml or .xml.bz2, single- or multistream) ->
                                          text: main-namespace articles, no redirects, one paragraph a
                                          line, a blank line after each, in DIR/wiki_NNNNN.txt
      --index FILE                        a multistream dump's index: decode its streams in parallel
      --headings keep|drop (keep)  --shard-mb N (128)  --threads N  --overwrite
  shards --vocab FILE --output DIR INPUT...
      --max-seq-length N (128)  --max-predictions N (20)  --masked-lm-prob P (0.15)
      --short-seq-prob P (0.1)  --dupe-factor N (10)  --whole-word-mask  --seed N (12345)
      --sentences line|split (line)       one sentence per line, or split paragraphs by rules
      --documents blank-line|file         documents end at blank lines (default) or at file ends
      --shards N (auto)  --eval-fraction F (0.01)  --eval-shards N (1)
      --format dle|mlperf (dle)  --gzip LEVEL (1; 0 = none)  --threads N  --overwrite
      --cased | --uncased  --max-word-chars N
      --headings keep|drop  --shard-mb N  for a Wikipedia dump among the inputs (as wiki)
  from-tfrecord --output DIR INPUT...     TFRecord files of tf.train.Example (create_pretraining_data.py,
                                          MLPerf) -> one shard per file (DIR/NAME.hdf5); CRCs checked
      --format dle|mlperf (dle)  --gzip LEVEL (1; 0 = none)  --overwrite
  inspect --vocab FILE SHARD...           counts, length histogram, masking, decoded samples
      --samples K (3)
  bins --output DIR SHARDS...             split shards into length bins: DIR/bin_<b>/<name>
      --bins N (4)  --max-seq-length N (512)  --max-predictions N (80)
      --format dle|mlperf (dle)  --input-format auto|dle|mlperf|mlperf_packed  --gzip LEVEL  --overwrite
  eval-set --samples N --output FILE SHARDS...   N sequences drawn at random from held-out shards
      --seed N (12345)  --max-seq-length N (512)  --max-predictions N (80)
      --format dle|mlperf (dle)  --input-format ...  --gzip LEVEL  --overwrite

INPUT directories are searched recursively for *.txt files. A Wikipedia dump given to shards is
extracted first into DIR/text (as wiki does; a finished extraction of the same dump is reused).
)";

using Args = bert_tools::CommandLine;

// The command line of `bert-prep COMMAND`: its options (names without "--") and at least
// `min_inputs` positional inputs.
Args parse(int argc, char** argv, const std::string& command, const std::set<std::string>& with_value,
           const std::set<std::string>& flags, size_t min_inputs) {
  Args::Spec spec{.min_positional = min_inputs, .max_positional = Args::kUnbounded, .positional_name = "inputs"};
  for (const std::string& name : with_value) spec.with_value.insert("--" + name);
  for (const std::string& name : flags) spec.flags.insert("--" + name);
  return Args("bert-prep " + command, kUsage, argc, argv, 2, spec);
}

constexpr long long kMaxCount = 1LL << 40;

// The tokenizer's options from the command line (read before the vocabulary is loaded, so that a
// bad value is refused first); the case follows the vocabulary unless --cased or --uncased says.
TokenizerOptions tokenizer_options(const Args& args) {
  TokenizerOptions t;
  if (args.flag("--cased") && args.flag("--uncased")) fail(Code::invalid_argument, "--cased and --uncased exclude each other");
  t.max_word_chars = static_cast<int>(args.integer("--max-word-chars", 100, 1, 1 << 20));
  return t;
}

Tokenizer make_tokenizer(const Args& args, const Vocab& vocab, TokenizerOptions t) {
  t.lower_case = args.flag("--uncased") || (!args.flag("--cased") && !vocab.has_upper_case());
  return Tokenizer(vocab, t);
}

int threads_option(const Args& args) {
  return resolve_threads(static_cast<int>(args.integer("--threads", 0, 0, 4096)));
}

std::string read_all(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Code::io, "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.emplace_back(text.data() + pos, nl - pos);
    pos = nl + 1;
  }
  return lines;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Tokenizes all lines with `threads` threads, repeating until min_seconds have passed.
// Returns seconds per pass; `counts` gets the totals of one pass.
double timed_passes(const Tokenizer& tok, const std::vector<std::string_view>& lines, int threads, double min_seconds,
                    TokenizeCounts& counts, int& passes) {
  passes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  do {
    std::vector<TokenizeCounts> per(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::vector<int32_t> ids;
        const size_t begin = lines.size() * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t end = lines.size() * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        for (size_t i = begin; i < end; ++i) {
          ids.clear();
          tok.encode(lines[i], ids, &per[static_cast<size_t>(t)]);
        }
      });
    }
    for (std::thread& th : pool) th.join();
    counts = TokenizeCounts{};
    for (const TokenizeCounts& c : per) counts.add(c);
    ++passes;
  } while (seconds_since(t0) < min_seconds);
  return seconds_since(t0) / passes;
}

int cmd_tokenize(int argc, char** argv) {
  Args args = parse(argc, argv, "tokenize", {"vocab", "max-word-chars", "threads", "min-seconds"}, {"ids", "cased", "uncased", "benchmark", "json"}, 0);
  const double min_seconds = args.number("--min-seconds", 2.0, 0, 1e6);
  const int threads = threads_option(args);
  const TokenizerOptions tokenizer = tokenizer_options(args);
  const Vocab vocab = Vocab::load(args.required("--vocab"));
  const Tokenizer tok = make_tokenizer(args, vocab, tokenizer);
  std::vector<std::string> inputs = args.positional();
  if (inputs.empty()) inputs.push_back("-");

  if (args.flag("--benchmark")) {
    std::string text;
    for (const std::string& in : inputs) text += read_all(in);
    const std::vector<std::string_view> lines = split_lines(text);
    TokenizeCounts c1, cn;
    int passes1 = 0, passesn = 0;
    const double t1 = timed_passes(tok, lines, 1, min_seconds, c1, passes1);
    const double tn = timed_passes(tok, lines, threads, min_seconds, cn, passesn);
    const double mb = static_cast<double>(text.size()) / 1e6;
    if (args.flag("--json")) {
      std::printf("{\"bytes\": %zu, \"lines\": %zu, \"tokens\": %llu, \"unknown_words\": %llu, "
                  "\"single_thread\": {\"seconds\": %.6f, \"mb_per_s\": %.3f, \"tokens_per_s\": %.1f}, "
                  "\"threads\": %d, \"all_threads\": {\"seconds\": %.6f, \"mb_per_s\": %.3f, \"tokens_per_s\": %.1f}}\n",
                  text.size(), lines.size(), static_cast<unsigned long long>(c1.tokens),
                  static_cast<unsigned long long>(c1.unknown), t1, mb / t1, static_cast<double>(c1.tokens) / t1, threads,
                  tn, mb / tn, static_cast<double>(cn.tokens) / tn);
    } else {
      std::printf("text: %s, %zu lines, %llu tokens (%s lower-case, %llu [UNK] words, %llu invalid UTF-8 sequences)\n",
                  format_bytes(static_cast<double>(text.size())).c_str(), lines.size(),
                  static_cast<unsigned long long>(c1.tokens), tok.options().lower_case ? "with" : "without",
                  static_cast<unsigned long long>(c1.unknown), static_cast<unsigned long long>(c1.invalid_utf8));
      std::printf("1 thread:   %8.1f MB/s  %8.2f M tokens/s  (%d passes)\n", mb / t1,
                  static_cast<double>(c1.tokens) / t1 / 1e6, passes1);
      std::printf("%d threads: %8.1f MB/s  %8.2f M tokens/s  (%d passes)\n", threads, mb / tn,
                  static_cast<double>(cn.tokens) / tn / 1e6, passesn);
    }
    return 0;
  }

  const bool ids_out = args.flag("--ids");
  TokenizeCounts counts;
  uint64_t lines = 0;
  std::vector<int32_t> ids;
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& in : inputs) {
    std::ifstream file;
    if (in != "-") {
      file.open(in, std::ios::binary);
      if (!file) fail(Code::io, "cannot open '", in, "': ", std::strerror(errno));
    }
    std::istream& stream = in == "-" ? std::cin : file;
    uint64_t total = 0;
    if (in != "-") {
      file.seekg(0, std::ios::end);
      total = static_cast<uint64_t>(file.tellg());
      file.seekg(0);
    }
    Progress progress("tokenize " + in, total);
    std::string line;
    while (std::getline(stream, line)) {
      ids.clear();
      tok.encode(line, ids, &counts);
      out.clear();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out.push_back(' ');
        out += ids_out ? std::to_string(ids[i]) : vocab.token(ids[i]);
      }
      out.push_back('\n');
      std::fwrite(out.data(), 1, out.size(), stdout);
      ++lines;
      progress.add(line.size() + 1, 0);
    }
  }
  const double s = seconds_since(t0);
  std::fprintf(stderr, "tokenized %s in %llu lines: %llu tokens, %llu [UNK] words, %llu invalid UTF-8 sequences replaced, %.2f s\n",
               format_bytes(static_cast<double>(counts.bytes)).c_str(), static_cast<unsigned long long>(lines),
               static_cast<unsigned long long>(counts.tokens), static_cast<unsigned long long>(counts.unknown),
               static_cast<unsigned long long>(counts.invalid_utf8), s);
  return 0;
}

int cmd_vocab(int argc, char** argv) {
  Args args = parse(argc, argv, "vocab", {"size", "output", "min-frequency", "limit-alphabet", "threads", "max-word-chars"}, {"cased", "uncased"}, 1);
  VocabTrainOptions o;
  o.inputs = args.positional();
  const long long size = args.integer("--size", 30522, kMinVocabSize, 1 << 24);
  o.vocab_size = static_cast<size_t>(size);
  const std::string output = args.required("--output");
  o.lower_case = !args.flag("--cased");
  o.min_frequency = static_cast<uint64_t>(args.integer("--min-frequency", 2, 1, kMaxCount));
  o.limit_alphabet = static_cast<size_t>(args.integer("--limit-alphabet", 1000, 1, 1 << 24));
  o.max_word_chars = static_cast<int>(args.integer("--max-word-chars", 100, 1, 1 << 20));
  o.threads = threads_option(args);
  VocabTrainSummary sum;
  const std::vector<std::string> tokens = train_wordpiece_vocab(o, sum);
  const Vocab vocab = Vocab::from_tokens(tokens, output);
  vocab.save(output);
  std::printf("vocab: %s (%d tokens, %s)\n", output.c_str(), vocab.size(), o.lower_case ? "uncased" : "cased");
  std::printf("  input: %llu files, %s, %llu words (%llu distinct), %llu invalid UTF-8 sequences replaced\n",
              static_cast<unsigned long long>(sum.files), format_bytes(static_cast<double>(sum.bytes)).c_str(),
              static_cast<unsigned long long>(sum.words), static_cast<unsigned long long>(sum.distinct_words),
              static_cast<unsigned long long>(sum.invalid_utf8));
  std::printf("  learned: %llu characters (x2 with ##), %llu merged pieces, %llu [unused] fillers\n",
              static_cast<unsigned long long>(sum.alphabet), static_cast<unsigned long long>(sum.merges),
              static_cast<unsigned long long>(sum.unused_filled));
  std::printf("  time: counting %.2f s (%.1f MB/s), merging %.2f s\n", sum.count_seconds,
              static_cast<double>(sum.bytes) / 1e6 / std::max(sum.count_seconds, 1e-9), sum.merge_seconds);
  return 0;
}

void print_wiki_summary(const std::string& dir, const WikiExtractSummary& s) {
  if (s.up_to_date) {
    std::printf("wiki: %s is up to date (%llu articles in %zu files from these dumps; --overwrite is not needed)\n",
                dir.c_str(), static_cast<unsigned long long>(s.articles), s.files.size());
    return;
  }
  if (s.removed_partial_files > 0) {
    std::printf("wiki: removed %llu files an interrupted run left in %s and started again\n",
                static_cast<unsigned long long>(s.removed_partial_files), dir.c_str());
  }
  std::printf("wiki: %s: %llu articles in %zu files, %s of text\n", dir.c_str(), static_cast<unsigned long long>(s.articles),
              s.files.size(), format_bytes(static_cast<double>(s.text_bytes)).c_str());
  std::printf("  pages: %llu read: %llu redirects, %llu in other namespaces, %llu empty after cleaning\n",
              static_cast<unsigned long long>(s.pages), static_cast<unsigned long long>(s.redirects),
              static_cast<unsigned long long>(s.other_namespaces), static_cast<unsigned long long>(s.empty_articles));
  const double seconds = std::max(s.seconds, 1e-9);
  std::printf("  time: %.2f s: %.0f articles/s, %.1f MB/s of dump, %.1f MB/s of wikitext\n", s.seconds,
              static_cast<double>(s.articles) / seconds, static_cast<double>(s.input_bytes) / 1e6 / seconds,
              static_cast<double>(s.wikitext_bytes) / 1e6 / seconds);
}

WikiExtractOptions wiki_options(const Args& args) {
  WikiExtractOptions o;
  o.text.keep_headings = args.choice("--headings", "keep", {"keep", "drop"}) == "keep";
  o.shard_bytes = static_cast<uint64_t>(args.integer("--shard-mb", 128, 1, 1 << 20)) << 20;
  o.threads = threads_option(args);
  o.overwrite = args.flag("--overwrite");
  return o;
}

int cmd_wiki(int argc, char** argv) {
  Args args = parse(argc, argv, "wiki", {"output", "index", "headings", "shard-mb", "threads"}, {"overwrite"}, 1);
  WikiExtractOptions o = wiki_options(args);
  o.output_dir = args.required("--output");
  o.index = args.text("--index", "");
  o.dumps = args.positional();
  print_wiki_summary(o.output_dir, extract_wikipedia(o));
  return 0;
}

// A file named like a dump (.xml, .bz2) that holds one.
bool is_dump_input(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  return std::filesystem::is_regular_file(path) && (name.ends_with(".xml") || name.ends_with(".bz2")) &&
         looks_like_wiki_dump(path);
}

// shards' inputs with any Wikipedia dumps among them extracted into OUTPUT/text first.
std::vector<std::string> extract_dump_inputs(const Args& args, const std::vector<std::string>& inputs,
                                             const std::string& output) {
  std::vector<std::string> text_inputs;
  WikiExtractOptions wiki = wiki_options(args);
  wiki.output_dir = (std::filesystem::path(output) / "text").string();
  for (const std::string& in : inputs) {
    if (unfinished_extraction(in)) {
      fail(Code::invalid_argument, "'", in, "' holds the files of a bert-prep wiki run that did not finish (no wiki.done): "
           "run it again first");
    }
    (is_dump_input(in) ? wiki.dumps : text_inputs).push_back(in);
  }
  if (wiki.dumps.empty()) return inputs;
  const WikiExtractSummary s = extract_wikipedia(wiki);
  print_wiki_summary(wiki.output_dir, s);
  text_inputs.insert(text_inputs.end(), s.files.begin(), s.files.end());
  return text_inputs;
}

ShardOutputFormat format_option(const Args& args) {
  return args.choice("--format", "dle", {"dle", "mlperf"}) == "dle" ? ShardOutputFormat::dle : ShardOutputFormat::mlperf;
}

int cmd_shards(int argc, char** argv) {
  Args args = parse(argc, argv, "shards", {"vocab", "output", "max-seq-length", "max-predictions", "masked-lm-prob", "short-seq-prob", "dupe-factor",
             "seed", "sentences", "documents", "shards", "eval-fraction", "eval-shards", "format", "gzip", "threads",
             "max-word-chars", "headings", "shard-mb"}, {"whole-word-mask", "overwrite", "cased", "uncased"}, 1);
  ShardBuildOptions o;
  o.output_dir = args.required("--output");
  o.instances.max_seq_length = static_cast<int>(args.integer("--max-seq-length", 128, 2, 1 << 16));
  o.instances.max_predictions = static_cast<int>(args.integer("--max-predictions", 20, 0, 1 << 16));
  o.instances.masked_lm_prob = args.number("--masked-lm-prob", 0.15, 0, 1);
  o.instances.short_seq_prob = args.number("--short-seq-prob", 0.1, 0, 1);
  o.instances.whole_word_mask = args.flag("--whole-word-mask");
  o.dupe_factor = static_cast<int>(args.integer("--dupe-factor", 10, 1, 1 << 16));
  const long long seed = args.integer("--seed", 12345, 0, kMaxCount);
  o.seed = static_cast<uint64_t>(seed);
  const std::string sentences = args.choice("--sentences", "line", {"line", "split"});
  o.sentences = sentences == "line" ? SentenceMode::line : SentenceMode::split;
  const std::string documents = args.choice("--documents", "blank-line", {"blank-line", "file"});
  o.documents = documents == "file" ? DocumentMode::file : DocumentMode::blank_line;
  o.num_shards = static_cast<int>(args.integer("--shards", 0, 0, 1 << 20));
  o.eval_fraction = args.number("--eval-fraction", 0.01, 0, 1);
  o.eval_shards = static_cast<int>(args.integer("--eval-shards", 1, 0, 1 << 20));
  o.write.format = format_option(args);
  o.write.max_seq_length = o.instances.max_seq_length;
  o.write.max_predictions = o.instances.max_predictions;
  o.write.gzip_level = static_cast<int>(args.integer("--gzip", 1, 0, 9));
  o.threads = threads_option(args);
  o.overwrite = args.flag("--overwrite");
  const TokenizerOptions tokenizer = tokenizer_options(args);
  const Vocab vocab = Vocab::load(args.required("--vocab"));
  const Tokenizer tok = make_tokenizer(args, vocab, tokenizer);
  o.inputs = extract_dump_inputs(args, args.positional(), o.output_dir);

  const ShardBuildSummary s = build_shards(o, tok);
  std::printf("shards: %s (%s, %s)\n", o.output_dir.c_str(), args.text("--format", "dle").c_str(), tok.options().lower_case ? "uncased" : "cased");
  std::printf("  input: %llu files, %s, %llu documents (%llu empty, dropped), %llu sentences, %llu tokens\n",
              static_cast<unsigned long long>(s.files), format_bytes(static_cast<double>(s.input_bytes)).c_str(),
              static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(s.empty_documents),
              static_cast<unsigned long long>(s.sentences), static_cast<unsigned long long>(s.tokens.tokens));
  std::printf("  text: %llu [UNK] words, %llu invalid UTF-8 sequences replaced\n",
              static_cast<unsigned long long>(s.tokens.unknown), static_cast<unsigned long long>(s.tokens.invalid_utf8));
  std::printf("  output: %llu train instances in %llu shards, %llu eval instances in %llu shards, %s written\n",
              static_cast<unsigned long long>(s.train_instances), static_cast<unsigned long long>(s.train_shards),
              static_cast<unsigned long long>(s.eval_instances), static_cast<unsigned long long>(s.eval_shards),
              format_bytes(static_cast<double>(s.bytes_written)).c_str());
  const double m = static_cast<double>(std::max<uint64_t>(s.masks.masked, 1));
  std::printf("  masks: %llu predictions: %.1f%% [MASK], %.1f%% kept, %.1f%% random\n",
              static_cast<unsigned long long>(s.masks.masked), 100.0 * static_cast<double>(s.masks.replaced_mask) / m,
              100.0 * static_cast<double>(s.masks.kept) / m, 100.0 * static_cast<double>(s.masks.random) / m);
  std::printf("  time: %.2f s (%.1f MB/s) with %d threads\n", s.seconds,
              static_cast<double>(s.input_bytes) / 1e6 / std::max(s.seconds, 1e-9), o.threads);
  if (s.empty_shards > 0) {
    std::fprintf(stderr, "bert-prep: warning: %llu shards have no instances (their documents were empty)\n",
                 static_cast<unsigned long long>(s.empty_shards));
  }
  return 0;
}

int cmd_from_tfrecord(int argc, char** argv) {
  Args args = parse(argc, argv, "from-tfrecord", {"output", "format", "gzip"}, {"overwrite"}, 1);
  TfRecordConvertOptions o;
  o.output_dir = args.required("--output");
  o.format = format_option(args);
  o.gzip_level = static_cast<int>(args.integer("--gzip", 1, 0, 9));
  o.overwrite = args.flag("--overwrite");
  const auto t0 = std::chrono::steady_clock::now();
  const TfRecordConvertSummary s = convert_tfrecords(args.positional(), o);
  std::printf("shards: %s (%s) from %llu TFRecord files\n", o.output_dir.c_str(), args.text("--format", "dle").c_str(),
              static_cast<unsigned long long>(s.files));
  std::printf("  records: %llu (max_seq_length %d, max_predictions %d), %llu tokens, %llu masked predictions\n",
              static_cast<unsigned long long>(s.records), s.max_seq_length, s.max_predictions,
              static_cast<unsigned long long>(s.tokens), static_cast<unsigned long long>(s.predictions));
  std::printf("  output: %zu shards, %s written in %.2f s\n", s.outputs.size(),
              format_bytes(static_cast<double>(s.bytes_written)).c_str(), seconds_since(t0));
  return 0;
}

// Options shared by the commands that rewrite existing shards (bins, eval-set).
ShardRewriteOptions rewrite_options(const Args& args) {
  ShardRewriteOptions o;
  o.limits.max_seq_length = static_cast<int>(args.integer("--max-seq-length", 512, 2, 1 << 16));
  o.limits.max_predictions_per_seq = static_cast<int>(args.integer("--max-predictions", 80, 1, 1 << 16));
  o.limits.vocab_size = std::numeric_limits<int32_t>::max();  // ids are copied, not interpreted
  o.format = args.choice("--input-format", "auto", {"auto", "dle", "mlperf", "mlperf_packed"});
  o.write.format = format_option(args);
  o.write.gzip_level = static_cast<int>(args.integer("--gzip", 1, 0, 9));
  o.overwrite = args.flag("--overwrite");
  return o;
}

int cmd_bins(int argc, char** argv) {
  Args args = parse(argc, argv, "bins", {"output", "bins", "max-seq-length", "max-predictions", "format", "input-format", "gzip"}, {"overwrite"}, 1);
  const ShardRewriteOptions o = rewrite_options(args);
  const std::string output = args.required("--output");
  const int bins = static_cast<int>(args.integer("--bins", 4, 1, 4096));
  const LengthBinSummary s = split_length_bins(args.positional(), output, bins, o);
  std::printf("bins: %llu shards split into %d length bins under %s\n", static_cast<unsigned long long>(s.files), bins,
              output.c_str());
  for (int b = 0; b < bins; ++b) {
    std::printf("  bin_%d: lengths %d-%d: %llu sequences\n", b, b * o.limits.max_seq_length / bins + 1,
                (b + 1) * o.limits.max_seq_length / bins, static_cast<unsigned long long>(s.per_bin[static_cast<size_t>(b)]));
  }
  return 0;
}

int cmd_eval_set(int argc, char** argv) {
  Args args = parse(argc, argv, "eval-set", {"output", "samples", "seed", "max-seq-length", "max-predictions", "format", "input-format", "gzip"}, {"overwrite"}, 1);
  const ShardRewriteOptions o = rewrite_options(args);
  const std::string output = args.required("--output");
  const long long samples = args.integer("--samples", 10000, 1, kMaxCount), seed = args.integer("--seed", 12345, 0, kMaxCount);
  const uint64_t n = pick_eval_samples(args.positional(), output, static_cast<uint64_t>(samples),
                                       static_cast<uint64_t>(seed), o);
  std::printf("eval-set: %llu sequences in %s%s\n", static_cast<unsigned long long>(n), output.c_str(),
              n < static_cast<uint64_t>(samples) ? " (all the inputs hold)" : "");
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  Args args = parse(argc, argv, "inspect", {"vocab", "samples", "bins"}, {}, 1);
  InspectOptions o;
  o.samples_to_show = static_cast<int>(args.integer("--samples", 3, 0, 1 << 20));
  o.histogram_bins = static_cast<int>(args.integer("--bins", 8, 1, 1000));
  const Vocab vocab = Vocab::load(args.required("--vocab"));
  for (const std::string& path : args.positional()) inspect_shard_file(path, vocab, o, std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "tokenize") return cmd_tokenize(argc, argv);
    if (command == "vocab") return cmd_vocab(argc, argv);
    if (command == "wiki") return cmd_wiki(argc, argv);
    if (command == "shards") return cmd_shards(argc, argv);
    if (command == "from-tfrecord") return cmd_from_tfrecord(argc, argv);
    if (command == "inspect") return cmd_inspect(argc, argv);
    if (command == "bins") return cmd_bins(argc, argv);
    if (command == "eval-set") return cmd_eval_set(argc, argv);
    std::fprintf(stderr, "bert-prep: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "bert-prep %s: error: %s\n", command.c_str(), e.what());
    return e.code() == bert::Code::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bert-prep %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
