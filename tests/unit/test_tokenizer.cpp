// WordPiece tokenizer against facts taken from running Google BERT's tokenization.py
// (FullTokenizer, with max_input_chars_per_word set to 100 and 200) on a multilingual text:
// accents, Greek final sigma, CJK and compatibility ideographs, controls, U+2028, invalid and
// very long words. Also vocab validation errors and non-UTF-8 input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

namespace bert {
namespace {

const std::vector<std::string> kSmallVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "hello", "world", "cafe",
    "resume", "naive", "strasse", "stra\303\237e", "Stra\303\237e", "Caf\303\251", "caf\303\251", "##s", "##e",
    "a", "b", "c", "##a", "##b", "##c", ",", ".", "!", "?", "'", "\"", "-", "(", ")", "\344\270\255",
    "\346\226\207", "\345\255\227", "\350\261\210", "\316\277", "##\316\264", "##\316\277\317\202", "##\317\202",
    "\317\203", "\317\202", "##\317\203", "\316\264", "\316\271", "##\316\271", "i", "##i", "x", "##x", "token",
    "##ization", "##izer", "running", "run", "##ning", "Hello", "World"};

const std::vector<std::string> kTexts = {
    "Hello, World! The caf\303\251's na\303\257ve r\303\251sum\303\251 (Stra\303\237e) isn't unaffable.",
    "\316\237\316\224\316\237\316\243. \316\277\316\264\316\277\317\202 \316\264'\316\243 \316\243a a\316\243-b\316\243",
    "\344\270\255\346\226\207\345\255\227\350\261\210\357\244\200x\344\270\255x  \343\200\200tokenization\342\200\250"
    "tokenizer",
    std::string("run\000ning\001 the\177\342\200\213running\357\273\277 \011Hello\015\012world\357\277\275!?", 46),
    "e\314\201 E\314\201 i\314\207 \304\260 \342\204\253",
    std::string(101, 'a') + " " + std::string(100, 'b') + " " + std::string(150, 'x'),
    "unaffable?!\"(c)\302\277hello\302\241 \342\200\224 \302\253world\302\273",
    "",
    "   \011  ",
};

std::string repeat(const std::string& piece, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += ' ';
    s += piece;
  }
  return s;
}

// Expected tokens (space-joined) per text, from the reference.
std::vector<std::string> expected(bool lower_case, int max_chars) {
  std::string long_words;
  if (max_chars == 100) {
    long_words.append("[UNK] b").append(repeat("##b", 99)).append(" [UNK]");
  } else {
    long_words.append("a").append(repeat("##a", 100)).append(" b").append(repeat("##b", 99));
    long_words.append(" x").append(repeat("##x", 149));
  }
  if (lower_case) {
    return {"hello , world ! the cafe ' [UNK] naive resume ( stra\303\237e ) [UNK] ' [UNK] un ##aff ##able .",
            "\316\277 ##\316\264 ##\316\277\317\202 . \316\277 ##\316\264 ##\316\277\317\202 \316\264 ' \317\202 \317\203 "
            "##a a ##\317\202 - b ##\317\202",
            "\344\270\255 \346\226\207 \345\255\227 \350\261\210 \350\261\210 x \344\270\255 x token ##ization token ##izer",
            "running [UNK] hello world ! ?",
            "[UNK] [UNK] i i a",
            long_words,
            "un ##aff ##able ? ! \" ( c ) [UNK] hello [UNK] [UNK] [UNK] world [UNK]",
            "",
            ""};
  }
  return {"Hello , World ! [UNK] caf\303\251 ' [UNK] [UNK] [UNK] ( Stra\303\237e ) [UNK] ' [UNK] un ##aff ##able .",
          "[UNK] . \316\277 ##\316\264 ##\316\277\317\202 \316\264 ' [UNK] [UNK] [UNK] - [UNK]",
          "\344\270\255 \346\226\207 \345\255\227 \350\261\210 [UNK] x \344\270\255 x token ##ization token ##izer",
          "running [UNK] Hello world ! ?",
          "[UNK] [UNK] [UNK] [UNK] [UNK]",
          long_words,
          "un ##aff ##able ? ! \" ( c ) [UNK] hello [UNK] [UNK] [UNK] world [UNK]",
          "",
          ""};
}

std::string tokens_of(const Tokenizer& tok, const std::string& text, TokenizeCounts* counts = nullptr) {
  std::vector<int32_t> ids;
  tok.encode(text, ids, counts);
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += tok.vocab().token(id);
  }
  return out;
}

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    path_ = (std::filesystem::temp_directory_path() / ("bert_tok_" + std::to_string(counter_++) + "_" +
                                                       std::to_string(::getpid()) + ".txt")).string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string error_of(const std::string& path) {
  try {
    Vocab::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tokenizer, MatchesReferenceOnMultilingualText) {
  const Vocab vocab = Vocab::from_tokens(kSmallVocab, "small");
  for (bool lower : {true, false}) {
    for (int max_chars : {100, 200}) {
      const Tokenizer tok(vocab, TokenizerOptions{lower, max_chars});
      const std::vector<std::string> want = expected(lower, max_chars);
      for (size_t i = 0; i < kTexts.size(); ++i) {
        EXPECT_EQ(tokens_of(tok, kTexts[i]), want[i]) << "text " << i << " lower_case " << lower << " max " << max_chars;
      }
    }
  }
}

TEST(Tokenizer, InvalidUtf8IsReplacedAndCounted) {
  const Vocab vocab = Vocab::from_tokens(kSmallVocab, "small");
  const Tokenizer tok(vocab, TokenizerOptions{});
  TokenizeCounts counts;
  // A stray continuation byte, an invalid lead byte, an encoded surrogate (three maximal
  // invalid subparts, as in Unicode's recommended practice) and a truncated sequence at the end;
  // each replacement U+FFFD is then dropped by the text cleaning.
  EXPECT_EQ(tokens_of(tok, "hel\x80lo wor\xffld \xed\xa0\x80the run\xe4\xb8", &counts), "hello world the run");
  EXPECT_EQ(counts.invalid_utf8, 6u);
  EXPECT_EQ(counts.tokens, 4u);
  EXPECT_EQ(counts.bytes, 26u);
}

TEST(Tokenizer, CountsUnknownWords) {
  const Vocab vocab = Vocab::from_tokens(kSmallVocab, "small");
  const Tokenizer tok(vocab, TokenizerOptions{});
  TokenizeCounts counts;
  EXPECT_EQ(tokens_of(tok, "hello zzz unaffable qq", &counts), "hello [UNK] un ##aff ##able [UNK]");
  EXPECT_EQ(counts.words, 4u);
  EXPECT_EQ(counts.unknown, 2u);
  EXPECT_EQ(counts.tokens, 6u);
}

TEST(Vocab, SpecialIdsAndLookup) {
  const Vocab vocab = Vocab::from_tokens(kSmallVocab, "small");
  EXPECT_EQ(vocab.pad_id, 0);
  EXPECT_EQ(vocab.unk_id, 1);
  EXPECT_EQ(vocab.mask_id, 4);
  EXPECT_EQ(vocab.find("##aff"), 7);
  EXPECT_EQ(vocab.find_piece("aff", 3, true), 7);
  EXPECT_EQ(vocab.find_piece("aff", 3, false), -1);
  EXPECT_TRUE(vocab.is_continuation(7));
  EXPECT_FALSE(vocab.is_continuation(6));
  EXPECT_TRUE(vocab.has_upper_case());
}

TEST(Vocab, LoadErrorsNameTheFile) {
  EXPECT_NE(error_of("/nonexistent/vocab.txt").find("cannot open vocab file '/nonexistent/vocab.txt'"), std::string::npos);

  TempFile no_specials("[PAD]\n[UNK]\nhello\n");
  const std::string e1 = error_of(no_specials.path());
  EXPECT_NE(e1.find(no_specials.path()), std::string::npos) << e1;
  EXPECT_NE(e1.find("lacks the special token(s) [CLS] [SEP] [MASK]"), std::string::npos) << e1;

  TempFile duplicate("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nhello\n");
  const std::string e2 = error_of(duplicate.path());
  EXPECT_NE(e2.find("line 8: duplicate token 'hello' (first at line 6)"), std::string::npos) << e2;

  TempFile bad_utf8("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhel\xfflo\n");
  EXPECT_NE(error_of(bad_utf8.path()).find("line 6: invalid UTF-8"), std::string::npos);

  TempFile empty("");
  EXPECT_NE(error_of(empty.path()).find("is empty"), std::string::npos);
}

TEST(Vocab, LoadStripsWhitespaceAndKeepsLineIds) {
  TempFile file("[PAD]\r\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n  hello \n##lo\n");
  const Vocab vocab = Vocab::load(file.path());
  EXPECT_EQ(vocab.size(), 7);
  EXPECT_EQ(vocab.find("hello"), 5);
  EXPECT_EQ(vocab.find("##lo"), 6);
  EXPECT_FALSE(vocab.has_upper_case());
}

// The full BERT uncased vocabulary from ../shared (skipped when absent): $BERT_SHARED_DATA, or
// shared/data found walking up from the working directory or from this test program.
std::string shared_vocab() {
  const std::string name = "bert-uncased-vocab.txt";
  if (const char* dir = std::getenv("BERT_SHARED_DATA")) {
    if (std::filesystem::exists(std::filesystem::path(dir) / name)) return (std::filesystem::path(dir) / name).string();
  }
  std::error_code ec;
  for (std::filesystem::path start : {std::filesystem::current_path(ec), std::filesystem::read_symlink("/proc/self/exe", ec)}) {
    for (int up = 0; up < 6 && !start.empty(); ++up, start = start.parent_path()) {
      const std::filesystem::path candidate = start / "shared" / "data" / name;
      if (std::filesystem::exists(candidate, ec)) return candidate.string();
      if (start == start.parent_path()) break;
    }
  }
  return "";
}

TEST(Tokenizer, FullUncasedVocabMatchesReference) {
  const std::string path = shared_vocab();
  if (path.empty()) GTEST_SKIP() << "../shared/data/bert-uncased-vocab.txt not found";
  const Vocab vocab = Vocab::load(path);
  EXPECT_EQ(vocab.size(), 30522);
  EXPECT_EQ(vocab.unk_id, 100);
  EXPECT_EQ(vocab.cls_id, 101);
  EXPECT_EQ(vocab.sep_id, 102);
  EXPECT_EQ(vocab.mask_id, 103);
  const Tokenizer tok(vocab, TokenizerOptions{});
  const std::string text = std::string(
      "The Caf\303\251 M\303\274ller in Z\303\274rich served cr\303\250me br\303\273l\303\251e; na\303"
      "\257ve tourists paid 12.50\342\202\254 (\302\241caro!). \316\225\316\273\316\273\316\267\316\275"
      "\316\271\316\272\316\254: \316\237\316\224\316\245\316\243\316\243\316\225\316\245\316\243 \316"
      "\272\316\261\316\271 \316\277\316\264\317\205\317\203\317\203\316\265\317\215\317\202. \320\240"
      "\321\203\321\201\321\201\320\272\320\270\320\271 \321\202\320\265\320\272\321\201\321\202, \320"
      "\265\321\211\321\221 \320\276\320\264\320\270\320\275. \346\235\261\344\272\254\343\201\257\346"
      "\227\245\346\234\254\343\201\256\351\246\226\351\203\275\343\201\247\343\201\231\343\200\202\345"
      "\214\227\344\272\254\346\254\242\350\277\216\344\275\240\357\274\201Control\000chars\007 and\342"
      "\200\213zero\302\255width \342\200\224 \342\200\234quotes\342\200\235 \302\253guillemets\302\273"
      " don't split-words Pneumonoultramicroscopicsilicovolcanoconiosis zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
      "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz \355"
      "\225\234\352\265\255\354\226\264 \355\205\215\354\212\244\355\212\270 \357\254\201ne \342\221"
      "\240\342\221\241",
      531);
  std::vector<int32_t> ids;
  tok.encode(text, ids);
  const std::vector<int32_t> want = {1996, 7668, 12304, 1999, 10204, 2366, 13675, 21382, 7987, 9307, 2063, 1025, 15743, 9045, 3825,
      2260, 1012, 2753, 30102, 1006, 1067, 2482, 2080, 999, 1007, 1012, 1159, 29727, 29727, 24824, 16177,
      18199, 29726, 14608, 1024, 1169, 29722, 29735, 29733, 29733, 29723, 29735, 19579, 1164, 14608,
      18199, 1169, 29722, 29735, 29733, 29733, 29723, 29735, 19579, 1012, 1195, 29748, 29747, 29747,
      23925, 15414, 1197, 15290, 23925, 29747, 22919, 1010, 1185, 29754, 15290, 1193, 29742, 10325, 18947,
      1012, 1879, 1755, 1672, 1864, 1876, 1671, 100, 1961, 1665, 30184, 1636, 1781, 1755, 100, 100, 100,
      1986, 2491, 7507, 2869, 1998, 6290, 5004, 3593, 2705, 1517, 1523, 16614, 1524, 1077, 26458, 6216,
      11368, 2015, 1090, 2123, 1005, 1056, 3975, 1011, 2616, 1052, 2638, 2819, 17175, 11314, 6444, 2594,
      7352, 26461, 27572, 11261, 6767, 15472, 6761, 8663, 10735, 2483, 100, 1469, 30006, 30021, 29991,
      30014, 30020, 29999, 30008, 1467, 30009, 30020, 29997, 30017, 30003, 30017, 1984, 2638, 100};
  EXPECT_EQ(ids, want);
}

}  // namespace
}  // namespace bert
