// Vocabulary loading, validation, saving, and the piece index used by WordPiece lookups.
#include "text/vocab.h"

#include <cstring>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "text/utf8.h"

namespace bert {
namespace {

constexpr const char* kSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
  return s;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  bool invalid = false;
  while (i < s.size() && !invalid) decode_utf8(p, s.size(), i, &invalid);
  return !invalid;
}

inline uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

}  // namespace

uint64_t piece_hash(const char* bytes, size_t length, bool continuation) {
  uint64_t h = 0x9E3779B97F4A7C15ull * (length + 1) + (continuation ? 0x632BE59BD9B4E019ull : 0);
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    h = mix(h ^ w);
  }
  if (i < length) {
    uint64_t w = 0;
    std::memcpy(&w, bytes + i, length - i);
    h = mix(h ^ w);
  }
  return h;
}

Vocab Vocab::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Code::io, "cannot open vocab file '", path, "': ", std::strerror(errno));
  std::vector<std::string> tokens;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view token = strip(line);
    if (!valid_utf8(token)) fail(Code::data, "vocab file '", path, "' line ", line_no, ": invalid UTF-8");
    tokens.emplace_back(token);
  }
  if (in.bad()) fail(Code::io, "error reading vocab file '", path, "'");
  return from_tokens(std::move(tokens), path);
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens, const std::string& origin) {
  if (tokens.empty()) fail(Code::data, "vocab file '", origin, "' is empty");
  Vocab v;
  v.origin_ = origin;
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto [it, inserted] = seen.emplace(tokens[i], i);
    if (!inserted && !tokens[i].empty()) {
      fail(Code::data, "vocab file '", origin, "' line ", i + 1, ": duplicate token '", tokens[i],
           "' (first at line ", it->second + 1, ")");
    }
  }
  std::string missing;
  for (const char* s : kSpecials) {
    if (!seen.count(s)) missing += std::string(missing.empty() ? "" : " ") + s;
  }
  if (!missing.empty()) {
    fail(Code::data, "vocab file '", origin, "' lacks the special token(s) ", missing,
         " (a BERT vocab needs [PAD] [UNK] [CLS] [SEP] [MASK])");
  }
  v.pad_id = static_cast<int32_t>(seen["[PAD]"]);
  v.unk_id = static_cast<int32_t>(seen["[UNK]"]);
  v.cls_id = static_cast<int32_t>(seen["[CLS]"]);
  v.sep_id = static_cast<int32_t>(seen["[SEP]"]);
  v.mask_id = static_cast<int32_t>(seen["[MASK]"]);
  v.tokens_ = std::move(tokens);
  v.build_index();
  return v;
}

void Vocab::build_index() {
  size_t capacity = 16;
  while (capacity < tokens_.size() * 3) capacity *= 2;  // load factor < 0.5 (some tokens have two keys)
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  continuation_.assign(tokens_.size(), 0);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    if (t.empty()) continue;
    insert(t.data(), t.size(), false, static_cast<int32_t>(id));
    if (t.size() > 2 && t[0] == '#' && t[1] == '#') {
      continuation_[id] = 1;
      insert(t.data() + 2, t.size() - 2, true, static_cast<int32_t>(id));
    }
  }
}

void Vocab::insert(const char* bytes, size_t length, bool continuation, int32_t id) {
  const uint64_t h = piece_hash(bytes, length, continuation);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s = Slot{static_cast<uint32_t>(h >> 32), id, static_cast<uint32_t>(key_bytes_.size()),
               static_cast<uint32_t>(length * 2 + continuation)};
      key_bytes_.append(bytes, length);
      size_t& longest = continuation ? max_cont_ : max_initial_;
      if (length > longest) longest = length;
      return;
    }
  }
}

namespace {
bool same_bytes(const char* a, const char* b, size_t n) {
  for (; n >= 8; n -= 8, a += 8, b += 8) {
    uint64_t x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    if (x != y) return false;
  }
  for (; n > 0; --n, ++a, ++b) {
    if (*a != *b) return false;
  }
  return true;
}
}  // namespace

int32_t Vocab::find_piece(const char* bytes, size_t length, bool continuation) const {
  const uint64_t h = piece_hash(bytes, length, continuation);
  const auto tag = static_cast<uint32_t>(h >> 32);
  const auto kind = static_cast<uint32_t>(length * 2 + continuation);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.tag == tag && s.kind == kind && same_bytes(key_bytes_.data() + s.offset, bytes, length)) return s.id;
  }
}

int32_t Vocab::find(std::string_view token) const {
  if (token.empty()) return -1;
  return find_piece(token.data(), token.size(), false);
}

bool Vocab::has_upper_case() const {
  for (const std::string& t : tokens_) {
    if (t.size() >= 2 && t.front() == '[' && t.back() == ']') continue;
    for (char c : t) {
      if (c >= 'A' && c <= 'Z') return true;
    }
  }
  return false;
}

void Vocab::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(Code::io, "cannot write vocab file '", path, "': ", std::strerror(errno));
  for (const std::string& t : tokens_) out << t << '\n';
  out.flush();
  if (!out) fail(Code::io, "error writing vocab file '", path, "'");
}

}  // namespace bert
