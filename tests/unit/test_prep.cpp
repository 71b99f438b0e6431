// bert-prep building blocks: sentence splitting, document indexing, the
// create_pretraining_data port (structure, masking rule, whole-word masking, determinism),
// vocabulary learning, and shards written by write_shard read back by the engine's reader.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "prep/pretraining_instances.h"
#include "prep/sentence_splitter.h"
#include "data/shard_reader.h"
#include "prep/shard_writer.h"
#include "prep/text_corpus.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "prep/vocab_trainer.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("bert_prep_test_" + std::to_string(::getpid()) + "_" + std::to_string(n_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  static inline int n_ = 0;
  fs::path path_;
};

void write_file(const fs::path& p, const std::string& content) { std::ofstream(p, std::ios::binary) << content; }

std::vector<std::string> sentences_of(const std::string& text) {
  std::vector<std::string_view> out;
  split_sentences(text, out);
  return {out.begin(), out.end()};
}

TEST(SentenceSplitter, RulesForAbbreviationsInitialsNumbersAndCjk) {
  EXPECT_EQ(sentences_of("Dr. Smith went to Washington. He arrived at 3.30 p.m. on Monday! Was it J. K. Rowling? "
                         "\"Yes.\" (It was.) The U.S. team won, e.g. twice... Then it ended"),
            (std::vector<std::string>{"Dr. Smith went to Washington.", "He arrived at 3.30 p.m. on Monday!",
                                      "Was it J. K. Rowling?", "\"Yes.\"", "(It was.)",
                                      "The U.S. team won, e.g. twice...", "Then it ended"}));
  EXPECT_EQ(sentences_of("\344\273\212\345\244\251\345\276\210\345\245\275\343\200\202\346\230\216\345\244\251\350\247\201\357\274\201"),
            (std::vector<std::string>{"\344\273\212\345\244\251\345\276\210\345\245\275\343\200\202",
                                      "\346\230\216\345\244\251\350\247\201\357\274\201"}));
  EXPECT_TRUE(sentences_of("   ").empty());
}

TEST(TextCorpus, DocumentsAndSentences) {
  TempDir dir;
  fs::create_directories(dir / "sub");
  write_file(dir / "b.txt", "First line.\nSecond line.\n\n \t\nThird doc. Two sentences.\nMore.");
  write_file(dir / "sub" / "a.txt", "\n\nOnly doc\n");
  write_file(dir / "ignored.md", "not text\n");
  const std::vector<CorpusFile> files = list_corpus_files({dir.path().string()});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0].path).filename(), "b.txt");  // sorted by path
  EXPECT_EQ(fs::path(files[1].path).filename(), "a.txt");

  const std::vector<DocumentRange> docs = index_documents(files, DocumentMode::blank_line);
  ASSERT_EQ(docs.size(), 3u);
  DocumentReader reader(files);
  std::string text;
  std::vector<std::string_view> s;
  reader.read(docs[0], text);
  EXPECT_EQ(text, "First line.\nSecond line.\n");
  document_sentences(text, SentenceMode::line, s);
  EXPECT_EQ(s, (std::vector<std::string_view>{"First line.", "Second line."}));
  reader.read(docs[1], text);
  EXPECT_EQ(text, "Third doc. Two sentences.\nMore.");
  document_sentences(text, SentenceMode::split, s);
  EXPECT_EQ(s, (std::vector<std::string_view>{"Third doc.", "Two sentences.", "More."}));
  reader.read(docs[2], text);
  EXPECT_EQ(text, "Only doc\n");

  EXPECT_EQ(index_documents(files, DocumentMode::file).size(), 2u);
  try {
    list_corpus_files({(dir / "missing").string()});
    FAIL() << "no error for a missing input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing' does not exist"), std::string::npos) << e.what();
  }
}

// A vocab of 5 specials (ids 0-4) + words w0..w49 (5..54) + continuations ##c0..##c19 (55..74).
Vocab synthetic_vocab() {
  std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 50; ++i) t.push_back(std::string("w").append(std::to_string(i)));
  for (int i = 0; i < 20; ++i) t.push_back(std::string("##c").append(std::to_string(i)));
  return Vocab::from_tokens(t, "synthetic");
}

std::vector<TokenizedDocument> synthetic_docs(uint64_t seed) {
  PrepRandom rng(seed, 99);
  std::vector<TokenizedDocument> docs(40);
  for (TokenizedDocument& d : docs) {
    const int sentences = static_cast<int>(rng.randint(1, 12));
    for (int s = 0; s < sentences; ++s) {
      const int words = static_cast<int>(rng.randint(3, 30));
      for (int w = 0; w < words; ++w) {
        d.tokens.push_back(static_cast<int32_t>(rng.randint(5, 54)));
        if (rng.uniform() < 0.3) d.tokens.push_back(static_cast<int32_t>(rng.randint(55, 74)));
      }
      d.sentence_ends.push_back(static_cast<uint32_t>(d.tokens.size()));
    }
  }
  return docs;
}

InstanceBuffer build(const std::vector<TokenizedDocument>& docs, const InstanceOptions& o, uint64_t seed, MaskCounts& m) {
  const Vocab vocab = synthetic_vocab();
  PrepRandom rng(seed, 1);
  InstanceBuffer out;
  for (int dupe = 0; dupe < 3; ++dupe) {
    for (size_t i = 0; i < docs.size(); ++i) create_instances_from_document(docs, i, o, vocab, rng, out, m);
  }
  return out;
}

TEST(PretrainingInstances, StructureAndMaskingRule) {
  const Vocab vocab = synthetic_vocab();
  const std::vector<TokenizedDocument> docs = synthetic_docs(7);
  InstanceOptions o;
  o.max_seq_length = 64;
  o.max_predictions = 8;
  MaskCounts m;
  const InstanceBuffer b = build(docs, o, 42, m);
  ASSERT_GT(b.size(), 300u);
  uint64_t random_next = 0, short_ones = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const int32_t* ids = b.input_ids.data() + b.token_offsets[i];
    const auto len = static_cast<size_t>(b.length(i));
    const size_t a_len = b.segment_a_length[i];
    ASSERT_LE(len, 64u);
    ASSERT_GE(a_len, 3u);
    ASSERT_LT(a_len, len - 1);
    EXPECT_EQ(ids[0], vocab.cls_id);
    EXPECT_EQ(ids[a_len - 1], vocab.sep_id);
    EXPECT_EQ(ids[len - 1], vocab.sep_id);
    const auto want = static_cast<uint64_t>(std::min<double>(8, std::max(1.0, std::nearbyint(0.15 * static_cast<double>(len)))));
    EXPECT_EQ(b.masks(i), want) << "instance " << i << " length " << len;
    int32_t last = -1;
    for (uint64_t k = b.mask_offsets[i]; k < b.mask_offsets[i + 1]; ++k) {
      const int32_t pos = b.positions[k];
      EXPECT_GT(pos, last);  // ascending, unique
      last = pos;
      ASSERT_LT(static_cast<size_t>(pos), len);
      EXPECT_NE(b.labels[k], vocab.cls_id);
      EXPECT_NE(b.labels[k], vocab.sep_id);
      EXPECT_NE(static_cast<size_t>(pos), a_len - 1);
    }
    random_next += b.random_next[i];
    short_ones += len < 40;
  }
  const double n = static_cast<double>(b.size());
  EXPECT_NEAR(static_cast<double>(random_next) / n, 0.5, 0.08);
  EXPECT_GT(short_ones, 0u);  // short_seq_prob makes some instances short
  const double masked = static_cast<double>(m.masked);
  EXPECT_NEAR(static_cast<double>(m.replaced_mask) / masked, 0.8, 0.03);
  EXPECT_NEAR(static_cast<double>(m.kept) / masked, 0.1, 0.03);
  EXPECT_NEAR(static_cast<double>(m.random) / masked, 0.1, 0.03);
}

TEST(PretrainingInstances, WholeWordMaskingMasksWholeWords) {
  const Vocab vocab = synthetic_vocab();
  const std::vector<TokenizedDocument> docs = synthetic_docs(8);
  InstanceOptions o;
  o.max_seq_length = 64;
  o.whole_word_mask = true;
  MaskCounts m;
  const InstanceBuffer b = build(docs, o, 3, m);
  uint64_t continuation_masks = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<int32_t> original(b.input_ids.begin() + static_cast<long>(b.token_offsets[i]),
                                  b.input_ids.begin() + static_cast<long>(b.token_offsets[i + 1]));
    std::vector<bool> masked(original.size(), false);
    for (uint64_t k = b.mask_offsets[i]; k < b.mask_offsets[i + 1]; ++k) {
      original[static_cast<size_t>(b.positions[k])] = b.labels[k];
      masked[static_cast<size_t>(b.positions[k])] = true;
    }
    for (size_t p = 1; p < original.size(); ++p) {
      const bool cont = vocab.is_continuation(original[p]);
      const bool prev_special = original[p - 1] == vocab.cls_id || original[p - 1] == vocab.sep_id;
      if (cont && !prev_special) {
        EXPECT_EQ(masked[p], masked[p - 1]) << "instance " << i << " position " << p;
      }
      continuation_masks += cont && masked[p];
    }
  }
  EXPECT_GT(continuation_masks, 50u);
}

TEST(PretrainingInstances, SameSeedSameInstances) {
  const std::vector<TokenizedDocument> docs = synthetic_docs(9);
  InstanceOptions o;
  MaskCounts m1, m2, m3;
  const InstanceBuffer a = build(docs, o, 5, m1), b = build(docs, o, 5, m2), c = build(docs, o, 6, m3);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.random_next, b.random_next);
  EXPECT_NE(a.input_ids, c.input_ids);
}

TEST(VocabTrainer, LearnsBertLayoutOfExactSize) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "The tokenizer learns pieces such as token, tokens, tokenization and learning. Caf\303\251 "
            "na\303\257ve r\303\251sum\303\251 number ";
    text += std::to_string(i);
    text += ".\n";
    if (i % 10 == 9) text += "\n";
  }
  write_file(dir / "corpus.txt", text);
  VocabTrainOptions o;
  o.inputs = {dir.path().string()};
  o.vocab_size = 240;
  o.threads = 2;
  VocabTrainSummary sum;
  const std::vector<std::string> tokens = train_wordpiece_vocab(o, sum);
  ASSERT_EQ(tokens.size(), 240u);
  EXPECT_EQ(tokens[0], "[PAD]");
  EXPECT_EQ(tokens[1], "[unused0]");
  EXPECT_EQ(tokens[100], "[UNK]");
  EXPECT_EQ(tokens[101], "[CLS]");
  EXPECT_EQ(tokens[102], "[SEP]");
  EXPECT_EQ(tokens[103], "[MASK]");
  EXPECT_GT(sum.merges, 20u);
  EXPECT_EQ(sum.files, 1u);
  const Vocab vocab = Vocab::from_tokens(tokens, "learned");  // unique, specials present
  EXPECT_GE(vocab.find("token"), 104);
  EXPECT_GE(vocab.find("the"), 104);  // lower-cased
  const Tokenizer tok(vocab, TokenizerOptions{});
  TokenizeCounts counts;
  std::vector<int32_t> ids;
  tok.encode(text, ids, &counts);
  EXPECT_EQ(counts.unknown, 0u);  // every character of the corpus is in the alphabet
  EXPECT_LT(counts.tokens, counts.words * 2);
}

InstanceBuffer small_buffer() {
  InstanceBuffer b;
  // instance 0: [CLS] 7 8 [SEP] 9 [SEP], mask at 2 (label 8); instance 1: 7 tokens, masks at 1, 5
  b.input_ids = {2, 7, 4, 3, 9, 3, 2, 10, 11, 3, 12, 4, 3};
  b.token_offsets = {0, 6, 13};
  b.segment_a_length = {4, 4};
  b.positions = {2, 1, 5};
  b.labels = {8, 10, 13};
  b.mask_offsets = {0, 1, 3};
  b.random_next = {1, 0};
  return b;
}

TEST(ShardWriter, DleShardReadBackByEngineReader) {
  TempDir dir;
  const InstanceBuffer b = small_buffer();
  ShardWriteOptions o;
  o.max_seq_length = 8;
  o.max_predictions = 3;
  const std::string path = (dir / "s.hdf5").string();
  write_shard(path, b, {1, 0}, o);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  ShardLimits limits;
  limits.max_seq_length = 8;
  limits.max_predictions_per_seq = 3;
  limits.vocab_size = 20;
  const ShardSamples s = read_shard(path, limits, "dle");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.length(0), 7);  // order {1, 0}
  EXPECT_EQ(std::vector<int32_t>(s.input_ids.begin(), s.input_ids.begin() + 7),
            (std::vector<int32_t>{2, 10, 11, 3, 12, 4, 3}));
  EXPECT_EQ(std::vector<int8_t>(s.segment_ids.begin(), s.segment_ids.begin() + 7),
            (std::vector<int8_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(s.masked_lm_positions, (std::vector<int32_t>{1, 5, 2}));
  EXPECT_EQ(s.masked_lm_ids, (std::vector<int32_t>{10, 13, 8}));
  EXPECT_EQ(s.next_sentence_labels, (std::vector<int8_t>{0, 1}));
}

TEST(ShardWriter, MlperfShardReadBackByEngineReader) {
  TempDir dir;
  const InstanceBuffer b = small_buffer();
  ShardWriteOptions o;
  o.format = ShardOutputFormat::mlperf;
  const std::string path = (dir / "m.hdf5").string();
  write_shard(path, b, {0, 1}, o);
  ShardLimits limits;
  limits.max_seq_length = 8;
  limits.max_predictions_per_seq = 3;
  limits.vocab_size = 20;
  const ShardSamples s = read_shard(path, limits, "mlperf");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.length(0), 6);
  EXPECT_EQ(s.input_ids, b.input_ids);
  EXPECT_EQ(s.masked_lm_positions, b.positions);
  EXPECT_EQ(s.masked_lm_ids, b.labels);
  EXPECT_EQ(s.next_sentence_labels, (std::vector<int8_t>{1, 0}));
}

TEST(ShardWriter, UnwritableDirectoryNamesTheFile) {
  const InstanceBuffer b = small_buffer();
  try {
    write_shard("/nonexistent-dir/x.hdf5", b, {0, 1}, ShardWriteOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.hdf5.tmp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
