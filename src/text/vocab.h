// A WordPiece vocabulary: one token per line, id = line number (BERT's vocab.txt). Loading
// validates the file (UTF-8, no duplicates, the special tokens [PAD] [UNK] [CLS] [SEP] [MASK])
// and builds an open-addressing index of word-initial and "##" continuation pieces so the
// tokenizer looks up byte ranges without building strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bert {

class Vocab {
 public:
  // Reads a vocab file; Error(io) if it cannot be read, Error(data) naming the file and line for
  // invalid UTF-8, duplicates, or missing special tokens.
  static Vocab load(const std::string& path);
  // Builds a vocab from tokens (id = index); `origin` names the source in error messages.
  static Vocab from_tokens(std::vector<std::string> tokens, const std::string& origin);
  // Writes one token per line; Error(io) naming the file on failure.
  void save(const std::string& path) const;

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::string& origin() const { return origin_; }
  // Id of a token written as in the file ("##ing" for a continuation), or -1.
  int32_t find(std::string_view token) const;
  // Id of a word piece given without its "##" prefix, or -1.
  int32_t find_piece(const char* bytes, size_t length, bool continuation) const;
  // Longest piece in bytes, per kind (bounds the greedy longest-match search).
  size_t max_piece_bytes(bool continuation) const { return continuation ? max_cont_ : max_initial_; }
  bool is_continuation(int32_t id) const { return continuation_[static_cast<size_t>(id)] != 0; }
  // True when some ordinary token has an upper-case ASCII letter (a cased vocabulary).
  bool has_upper_case() const;

  int32_t pad_id = -1, unk_id = -1, cls_id = -1, sep_id = -1, mask_id = -1;

 private:
  struct Slot {  // 16 bytes, so the table of a 30k vocab stays within L2
    uint32_t tag = 0;  // high half of the hash
    int32_t id = -1;   // -1: empty
    uint32_t offset = 0;
    uint32_t kind = 0;  // length * 2 + continuation
  };
  void build_index();
  void insert(const char* bytes, size_t length, bool continuation, int32_t id);

  std::string origin_;
  std::vector<std::string> tokens_;
  std::vector<uint8_t> continuation_;  // [V]
  std::string key_bytes_;              // keys of all slots, concatenated
  std::vector<Slot> slots_;            // power-of-two open addressing table
  uint64_t mask_ = 0;
  size_t max_initial_ = 0, max_cont_ = 0;
};

// Hash of a byte range used by the vocab index (fast for the short keys of word pieces).
uint64_t piece_hash(const char* bytes, size_t length, bool continuation);

}  // namespace bert
