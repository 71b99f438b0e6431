// Wikitext to paragraphs. The passes and their order follow WikiExtractor's clean() and compact()
// (wikiextractor 3.x with --no-templates), so that the two agree article by article; each pass is
// a hand-written scanner over the text instead of a regular expression. Where WikiExtractor's
// patterns have quirks on unbalanced markup (a "{{" never closed, an "[[" never closed), the
// scanners reproduce them: tests/oracle/test_wiki_extract.py compares the two on real markup.
#include "prep/wikitext.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include <utf8proc.h>

#include "prep/html_entities.h"

namespace bert {
namespace {

constexpr size_t npos = std::string::npos;

struct Span {
  size_t begin = npos, end = npos;
  bool found() const { return begin != npos; }
};

// ---- characters -------------------------------------------------------------------------------

char32_t code_point_at(std::string_view s, size_t i, size_t* length) {
  if (static_cast<unsigned char>(s[i]) < 0x80) {
    *length = 1;
    return static_cast<char32_t>(s[i]);
  }
  utf8proc_int32_t cp = -1;
  const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0 || cp < 0) {
    *length = 1;
    return 0xFFFD;
  }
  *length = static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

// Where the code point that ends just before byte i starts.
size_t code_point_start_before(std::string_view s, size_t i) {
  size_t start = i - 1;
  while (start > 0 && i - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return start;
}

char32_t code_point_before(std::string_view s, size_t i) {
  size_t length = 0;
  return code_point_at(s, code_point_start_before(s, i), &length);
}

// Python's str.isspace(), which its regular expressions' \s follows.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's \w: letters, numbers and the underscore.
bool is_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool space_at(std::string_view s, size_t i) {
  size_t n = 0;
  return i < s.size() && is_space(code_point_at(s, i, &n));
}

size_t skip_spaces(std::string_view s, size_t i) {
  size_t n = 0;
  while (i < s.size() && is_space(code_point_at(s, i, &n))) i += n;
  return i;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_nocase(std::string_view s, size_t i, std::string_view word) {
  if (s.size() - std::min(i, s.size()) < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (lower(s[i + k]) != word[k]) return false;
  }
  return true;
}

// Python's str.strip() / rstrip() over Unicode whitespace.
std::string_view strip(std::string_view s, bool left = true) {
  const size_t b = left ? skip_spaces(s, 0) : 0;
  size_t e = s.size();
  while (e > b && is_space(code_point_before(s, e))) e = code_point_start_before(s, e);
  return s.substr(b, e - b);
}

void append_utf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// ---- spans ------------------------------------------------------------------------------------

// The text outside `spans`; a span starting inside an earlier one is skipped (nesting).
std::string drop_spans(std::vector<Span> spans, std::string_view text) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  for (const Span& s : spans) {
    if (offset <= s.begin) {
      out.append(text.substr(offset, s.begin - offset));
      offset = s.end;
    }
  }
  if (offset < text.size()) out.append(text.substr(offset));
  return out;
}

// A delimiter finder: the first match at or after `from`.
template <typename F>
concept Finder = requires(F f, std::string_view t, size_t p) {
  { f(t, p) } -> std::same_as<Span>;
};

// Drops nested open...close blocks, outermost first, with WikiExtractor's dropNested() rules for
// unbalanced input: an open never closed keeps the text after it; a missing close at the end
// extends the first span to the last close seen.
template <Finder Open, Finder Close>
std::string drop_nested(std::string_view text, Open open, Close close) {
  Span start = open(text, 0);
  if (!start.found()) return std::string(text);
  Span end = close(text, start.end);
  Span next = start;
  std::vector<Span> spans;
  int nest = 0;
  while (end.found()) {
    next = open(text, next.end);
    if (!next.found()) {
      while (nest > 0) {
        --nest;
        const Span further = close(text, end.end);
        if (!further.found()) break;
        end = further;
      }
      spans.push_back({start.begin, end.end});
      break;
    }
    while (end.end < next.begin) {
      if (nest > 0) {
        --nest;
        const size_t last = end.end;
        end = close(text, end.end);
        if (!end.found()) {
          const Span whole{spans.empty() ? start.begin : spans.front().begin, last};
          spans.assign(1, whole);
          break;
        }
      } else {
        spans.push_back({start.begin, end.end});
        start = next;
        end = close(text, next.end);
        break;
      }
    }
    if (next.begin != start.begin) ++nest;
  }
  return drop_spans(std::move(spans), text);
}

auto literal(std::string_view delimiter) {
  return [delimiter](std::string_view text, size_t from) {
    const size_t at = from > text.size() ? npos : text.find(delimiter, from);
    return at == npos ? Span{} : Span{at, at + delimiter.size()};
  };
}

// ---- tags -------------------------------------------------------------------------------------

// After "<" (and optional spaces when `spaces_after_lt`), the tag name and a word boundary; returns
// the position after the name or npos.
size_t tag_name_end(std::string_view text, size_t lt, std::string_view name, bool spaces_after_lt) {
  size_t i = lt + 1;
  if (spaces_after_lt) i = skip_spaces(text, i);
  if (!starts_with_nocase(text, i, name)) return npos;
  i += name.size();
  size_t n = 0;
  if (i < text.size() && is_word(code_point_at(text, i, &n))) return npos;
  return i;
}

// Scans attributes as (?:"[^"]*"|'[^']*'|[^>])* does (quoted values atomic) to the first '>' not in
// quotes. Returns its position (npos if none within kMaxTagBytes: no tag is that long, and the
// bound keeps hostile text linear) and where the last quoted value ended.
constexpr size_t kMaxTagBytes = 4096;

size_t attributes_end(std::string_view text, size_t i, size_t* last_quote_end) {
  *last_quote_end = i;
  const size_t limit = std::min(text.size(), i + kMaxTagBytes);
  while (i < limit && text[i] != '>') {
    if (text[i] == '"' || text[i] == '\'') {
      const size_t close = text.find(text[i], i + 1);
      if (close != npos) {
        i = close + 1;
        *last_quote_end = i;
        continue;
      }
    }
    ++i;
  }
  return i < limit && text[i] == '>' ? i : npos;
}

enum class TagEnd {
  any,             // <\s*name\b(attributes)*>
  not_self_close,  // ... (?<!/)>
  self_close,      // ... /\s*>
};

// An opening tag with attributes, as WikiExtractor's patterns for line breaks, discarded elements
// and self-closing tags read it.
auto opening_tag(std::string_view name, TagEnd kind) {
  return [name, kind](std::string_view text, size_t from) -> Span {
    for (size_t lt = text.find('<', from); lt != npos; lt = text.find('<', lt + 1)) {
      const size_t after = tag_name_end(text, lt, name, true);
      if (after == npos) continue;
      size_t last_quote_end = 0;
      const size_t gt = attributes_end(text, after, &last_quote_end);
      if (gt == npos) continue;
      if (kind == TagEnd::not_self_close && text[gt - 1] == '/') continue;
      if (kind == TagEnd::self_close) {
        size_t slash = gt;
        while (slash > after && space_at(text, slash - 1)) --slash;
        if (slash == after || text[slash - 1] != '/' || slash - 1 < last_quote_end) continue;
      }
      return {lt, gt + 1};
    }
    return {};
  };
}

// </\s*name\s*>, or </name\s*> when `spaces_after_slash` is false (WikiExtractor's close patterns).
auto closing_tag(std::string_view name, bool spaces_before_slash) {
  return [name, spaces_before_slash](std::string_view text, size_t from) -> Span {
    for (size_t lt = text.find('<', from); lt != npos; lt = text.find('<', lt + 1)) {
      size_t i = lt + 1;
      if (spaces_before_slash) i = skip_spaces(text, i);
      if (i >= text.size() || text[i] != '/') continue;
      i = skip_spaces(text, i + 1);
      if (!starts_with_nocase(text, i, name)) continue;
      i = skip_spaces(text, i + name.size());
      if (i < text.size() && text[i] == '>') return {lt, i + 1};
    }
    return {};
  };
}

// <name\b.*?> : the tag up to the nearest '>' (WikiExtractor's ignored and block tags).
auto loose_opening_tag(std::string_view name) {
  return [name](std::string_view text, size_t from) -> Span {
    for (size_t lt = text.find('<', from); lt != npos; lt = text.find('<', lt + 1)) {
      const size_t after = tag_name_end(text, lt, name, false);
      if (after == npos) continue;
      const size_t gt = text.find('>', after);
      if (gt == npos) return {};
      return {lt, gt + 1};
    }
    return {};
  };
}

// The names of the tags in the text ("<name", "</name", "< / name"), lower-cased: the passes below
// look only for the tags that occur.
std::vector<std::string> tag_names(std::string_view text) {
  std::vector<std::string> names;
  for (size_t lt = text.find('<'); lt != npos; lt = text.find('<', lt + 1)) {
    size_t i = skip_spaces(text, lt + 1);
    if (i < text.size() && text[i] == '/') i = skip_spaces(text, i + 1);
    std::string name;
    while (i < text.size() && name.size() < 16 && ((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') ||
                                                   (text[i] >= '0' && text[i] <= '9'))) {
      name.push_back(lower(text[i++]));
    }
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  return names;
}

bool has(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// <!-- ... -->
Span find_comment(std::string_view text, size_t from) {
  const size_t open = text.find("<!--", from);
  const size_t close = open == npos ? npos : text.find("-->", open + 4);
  return close == npos ? Span{} : Span{open, close + 3};
}

template <Finder F>
void collect(std::string_view text, F find, std::vector<Span>& spans) {
  for (Span s = find(text, 0); s.found(); s = find(text, s.end)) spans.push_back(s);
}

// Replaces each tag found by `finders` with `separator`, or with nothing where the tag touches
// whitespace or the text's ends (WikiExtractor's substituteLineBreakTag()).
template <typename... F>
std::string substitute_tags(std::string_view text, std::string_view separator, F... finders) {
  std::vector<Span> spans;
  (collect(text, finders, spans), ...);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::string out;
  size_t cur = 0;
  for (const Span& s : spans) {
    if (s.begin < cur) continue;
    out.append(text.substr(cur, s.begin - cur));
    const bool before = s.begin == 0 || is_space(code_point_before(text, s.begin));
    const bool after = s.end == text.size() || space_at(text, s.end);
    if (!before && !after) out.append(separator);
    cur = s.end;
  }
  out.append(text.substr(cur));
  return out;
}

// ---- links ------------------------------------------------------------------------------------

constexpr std::array<std::string_view, 28> kUrlProtocols = {
    "bitcoin:", "ftp://", "ftps://", "geo:", "git://", "gopher://", "http://", "https://", "irc://", "ircs://",
    "magnet:", "mailto:", "mms://", "news:", "nntp://", "redis://", "sftp://", "sip:", "sips:", "sms:",
    "ssh://", "svn://", "tel:", "telnet://", "urn:", "worldwind://", "xmpp:", "//"};

bool url_char(std::string_view s, size_t i, size_t* n) {
  const char32_t c = code_point_at(s, i, n);
  return !(c <= 0x20 || c == 0x7F || c == '[' || c == ']' || c == '<' || c == '>' || c == '"' || is_space(c));
}

// [url label] -> label; [url] -> nothing.
std::string replace_external_links(std::string text) {
  std::string out;  // built only once a link is found
  size_t cur = 0;
  for (size_t open = text.find('['); open != npos; open = text.find('[', open + 1)) {
    if (open < cur) continue;
    size_t i = open + 1;
    if (i >= text.size() || !(std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '/')) continue;  // "[[" mostly
    bool protocol = false;
    for (std::string_view p : kUrlProtocols) {
      if (starts_with_nocase(text, i, p)) {
        i += p.size();
        protocol = true;
        break;
      }
    }
    if (!protocol) continue;
    size_t n = 0;
    const size_t url_begin = i;
    while (i < text.size() && url_char(text, i, &n)) i += n;
    if (i == url_begin) continue;
    const size_t label_begin = skip_spaces(text, i);
    size_t close = label_begin;
    const size_t limit = std::min(text.size(), label_begin + kMaxTagBytes);
    while (close < limit && text[close] != ']') {
      const auto c = static_cast<unsigned char>(text[close]);
      if (c <= 0x08 || (c >= 0x0A && c <= 0x1F)) break;
      ++close;
    }
    if (close >= limit || text[close] != ']') continue;
    out.append(text, cur, open - cur);
    out.append(text, label_begin, close - label_begin);
    cur = close + 1;
  }
  if (cur == 0) return text;
  out.append(text, cur);
  return out;
}

// Balanced [[ ... ]] spans, outermost, as WikiExtractor's findBalanced() counts depth (an opening
// never closed hides every pair after it; used where that cannot happen or is what it does).
std::vector<Span> balanced_links(std::string_view text) {
  std::vector<Span> spans;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < text.size();) {
    if (text[i] == '[' && text[i + 1] == '[') {
      if (depth++ == 0) start = i;
      i += 2;
    } else if (depth > 0 && text[i] == ']' && text[i + 1] == ']') {
      if (--depth == 0) spans.push_back({start, i + 2});
      i += 2;
    } else {
      ++i;
    }
  }
  return spans;
}

// The outermost [[ ]] pairs, as WikiExtractor finds them after setting aside each "[[" that no "]]"
// closes (a stack over the whole text). Such an opening lies inside no pair, so skipping it is
// the same as masking it.
std::vector<Span> outermost_links(std::string_view text) {
  std::vector<size_t> opens;
  std::vector<Span> pairs;
  for (size_t i = 0; i + 1 < text.size();) {
    const char c = text[i];
    if (c != '[' && c != ']') {
      ++i;
    } else if (c == '[' && text[i + 1] == '[') {
      opens.push_back(i);
      i += 2;
    } else if (c == ']' && text[i + 1] == ']') {
      if (!opens.empty()) {
        pairs.push_back({opens.back(), i + 2});
        opens.pop_back();
      }
      i += 2;
    } else {
      ++i;
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Span& x, const Span& y) { return x.begin < y.begin; });
  std::vector<Span> outermost;
  for (const Span& p : pairs) {
    if (outermost.empty() || p.begin >= outermost.back().end) outermost.push_back(p);
  }
  return outermost;
}

bool accepted_namespace(std::string_view prefix) { return prefix == "w" || prefix == "wiktionary" || prefix == "wikt"; }

// The text a link shows: its label, or nothing for files, categories, interwiki and other namespaces.
std::string_view internal_link_text(std::string_view title, std::string_view label) {
  const size_t colon = title.find(':');
  if (colon != npos && colon > 0 && !accepted_namespace(title.substr(0, colon))) return {};
  if (colon == 0) {
    const size_t colon2 = title.find(':', 1);
    if (colon2 != npos && colon2 > 1 && !accepted_namespace(title.substr(1, colon2 - 1))) return {};
  }
  return label;
}

// [[title|label]]trail -> label + trail.
std::string replace_internal_links(std::string_view text) {
  if (text.find("[[") == npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t cur = 0;
  for (const Span& link : outermost_links(text)) {
    size_t end = link.end, n = 0;
    while (end < text.size() && is_word(code_point_at(text, end, &n))) end += n;
    const std::string_view trail = text.substr(link.end, end - link.end);
    const std::string_view inner = text.substr(link.begin + 2, link.end - link.begin - 4);
    size_t pipe = inner.find('|');
    std::string_view title = inner, label = inner;
    if (pipe != npos) {
      title = strip(inner.substr(0, pipe), false);
      size_t search_from = pipe + 1;
      for (const Span& nested : balanced_links(inner)) {
        const size_t last = nested.begin > search_from ? inner.substr(0, nested.begin).rfind('|') : npos;
        if (last != npos && last >= search_from) pipe = last;
        search_from = nested.end;
      }
      label = strip(inner.substr(pipe + 1));
    }
    out.append(text.substr(cur, link.begin - cur));
    out.append(internal_link_text(title, label));
    out.append(trail);
    cur = end;
  }
  out.append(text.substr(cur));
  return out;
}

// ---- words and quotes -------------------------------------------------------------------------

constexpr std::array<std::string_view, 18> kBehaviourSwitches = {
    "__NOTOC__", "__FORCETOC__", "__TOC__", "__NEWSECTIONLINK__", "__NONEWSECTIONLINK__", "__NOGALLERY__",
    "__HIDDENCAT__", "__NOCONTENTCONVERT__", "__NOCC__", "__NOTITLECONVERT__", "__NOTC__", "__START__", "__END__",
    "__INDEX__", "__NOINDEX__", "__STATICREDIRECT__", "__DISAMBIG__", "__NOEDITSECTION__"};

std::string drop_behaviour_switches(std::string text) {
  if (text.find("__") == npos) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    bool dropped = false;
    if (text[i] == '_' && i + 1 < text.size() && text[i + 1] == '_') {
      for (std::string_view s : kBehaviourSwitches) {
        if (text.compare(i, s.size(), s) == 0) {
          i += s.size();
          dropped = true;
          break;
        }
      }
    }
    if (!dropped) out.push_back(text[i++]);
  }
  return out;
}

// D(.*?)D -> before + inner + after, the inner text on one line.
std::string replace_quoted(std::string_view text, std::string_view d, std::string_view before, std::string_view after) {
  std::string out;
  out.reserve(text.size());
  size_t cur = 0;
  for (size_t i = text.find(d); i != npos;) {
    const size_t inner = i + d.size();
    const size_t close = text.find(d, inner);
    const size_t newline = text.find('\n', inner);
    if (close == npos || (newline != npos && newline < close)) {
      i = text.find(d, i + 1);
      continue;
    }
    out.append(text.substr(cur, i - cur)).append(before).append(text.substr(inner, close - inner)).append(after);
    cur = close + d.size();
    i = text.find(d, cur);
  }
  out.append(text.substr(cur));
  return out;
}

// open([^"]*?)close, where `close` starts with '"': the inner text holds no '"'.
std::string replace_quote_pair(std::string_view text, std::string_view open, std::string_view close) {
  std::string out;
  size_t cur = 0;
  for (size_t i = text.find(open); i != npos;) {
    const size_t inner = i + open.size();
    const size_t quote = text.find('"', inner);
    if (quote == npos || text.compare(quote, close.size(), close) != 0) {
      i = text.find(open, i + 1);
      continue;
    }
    out.append(text.substr(cur, i - cur)).append("\"").append(text.substr(inner, quote - inner)).append("\"");
    cur = quote + close.size();
    i = text.find(open, cur);
  }
  out.append(text.substr(cur));
  return out;
}

// Python's str.replace(): non-overlapping, left to right.
std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  size_t at = text.find(from);
  if (at == npos) return text;
  std::string out;
  out.reserve(text.size());
  size_t cur = 0;
  for (; at != npos; at = text.find(from, cur)) {
    out.append(text, cur, at - cur).append(to);
    cur = at + from.size();
  }
  out.append(text, cur);
  return out;
}

// '''''x''''' and '''x''' -> x; ''x'' -> "x"; then stray quote marks.
std::string replace_bold_italic(std::string text) {
  if (text.find("''") == npos && text.find("\"\"") == npos) return text;
  std::string t = replace_quoted(text, "'''''", "", "");
  t = replace_quoted(t, "'''", "", "");
  t = replace_quote_pair(t, "''\"", "\"''");
  t = replace_quoted(t, "''", "\"", "\"");
  t = replace_quote_pair(t, "\"\"", "\"\"");
  t = replace_all(std::move(t), "'''", "");
  return replace_all(std::move(t), "''", "\"");
}

// <syntaxhighlight ...>code</syntaxhighlight> -> code, whose entities stay as written: each '&' is
// escaped here so that decode_entities() gives it back.
std::string unwrap_syntaxhighlight(std::string text) {
  if (text.find("<syntaxhighlight ") == npos) return text;
  std::string out;
  size_t cur = 0;
  for (size_t open = text.find("<syntaxhighlight "); open != npos; open = text.find("<syntaxhighlight ", cur)) {
    const size_t gt = text.find('>', open);
    const size_t close = gt == npos ? npos : text.find("</syntaxhighlight>", gt);
    if (close == npos) break;
    out.append(text, cur, open - cur);
    out.append(replace_all(text.substr(gt + 1, close - gt - 1), "&", "&amp;"));
    cur = close + std::string_view("</syntaxhighlight>").size();
  }
  out.append(text, cur);
  return out;
}

// [[[[title]]]] -> [[title]]: doubled link brackets, a common authoring slip, collapsed as
// WikiExtractor does: with as many extra closing brackets right after the link, both sides; with
// no closing at all, or one that ends the text, the opening side; otherwise left as written.
std::string collapse_doubled_link_brackets(std::string text) {
  if (text.find("[[[") == npos) return text;
  std::string out;
  size_t cur = 0;
  for (size_t i = text.find("[[["); i != npos; i = text.find("[[[", cur)) {
    size_t j = i;
    while (j < text.size() && text[j] == '[') ++j;
    const size_t excess = j - i - 2;
    out.append(text, cur, i - cur);
    const std::vector<Span> rest = balanced_links(std::string_view(text).substr(j - 2));
    if (rest.empty() || rest.front().begin != 0) {
      out.append("[[");
      cur = j;
      continue;
    }
    const size_t end = j - 2 + rest.front().end;
    size_t trailing = 0;
    while (end + trailing < text.size() && text[end + trailing] == ']' && trailing < excess) ++trailing;
    if (trailing == excess) {
      out.append("[[").append(text, j, end - j);
      cur = end + excess;
    } else if (end == text.size()) {
      out.append("[[");
      cur = j;
    } else {
      out.append(text, i, j - i);
      cur = j;
    }
  }
  out.append(text, cur);
  return out;
}

// &name; &#123; &#x7B; -> the character; unknown references stay.
std::string decode_entities(std::string text) {
  if (text.find('&') == npos) return text;
  std::string out;
  out.reserve(text.size());
  size_t cur = 0;
  for (size_t amp = text.find('&'); amp != npos; amp = text.find('&', amp + 1)) {
    if (amp < cur) continue;
    size_t i = amp + 1, n = 0;
    if (i < text.size() && text[i] == '#') ++i;
    const size_t word = i;
    while (i < text.size() && is_word(code_point_at(text, i, &n))) i += n;
    if (i == word || i >= text.size() || text[i] != ';') continue;
    char32_t c = 0;
    if (!decode_html_entity(std::string_view(text).substr(amp + 1, i - amp - 1), c)) continue;
    out.append(text, cur, amp - cur);
    append_utf8(out, c);
    cur = i + 1;
  }
  if (cur == 0) return text;
  out.append(text, cur);
  return out;
}

// <math>..</math> -> formula_1, <code>..</code> -> codice_1 (identical elements share a number).
std::string replace_placeholders(std::string text, std::string_view tag, std::string_view placeholder) {
  std::vector<std::pair<Span, std::string>> found;
  auto open_at = [&](size_t lt) -> size_t {  // <\s*tag(\s*| [^>]+?)>
    size_t i = skip_spaces(text, lt + 1);
    if (!starts_with_nocase(text, i, tag)) return npos;
    i += tag.size();
    const size_t gt = text.find('>', i);
    if (gt == npos) return npos;
    if (i < text.size() && text[i] == ' ') return gt + 1;
    return skip_spaces(text, i) == gt ? gt + 1 : npos;
  };
  const auto close = closing_tag(tag, true);
  size_t from = 0;
  for (size_t lt = text.find('<'); lt != npos; lt = text.find('<', std::max(lt + 1, from))) {
    if (lt < from) continue;
    const size_t body = open_at(lt);
    if (body == npos) continue;
    const Span end = close(text, body);
    if (!end.found()) continue;
    found.push_back({{lt, end.end}, text.substr(lt, end.end - lt)});
    from = end.end;
  }
  std::map<std::string, size_t> number;
  for (size_t k = 0; k < found.size(); ++k) number.emplace(found[k].second, k + 1);
  std::string out;
  size_t cur = 0;
  for (const auto& [span, element] : found) {
    out.append(text, cur, span.begin - cur).append(placeholder).append("_").append(std::to_string(number[element]));
    cur = span.end;
  }
  out.append(text, cur);
  return out;
}

// ---- tidying ----------------------------------------------------------------------------------

bool is_nonword_at(std::string_view s, size_t i, size_t* n) { return !is_word(code_point_at(s, i, n)); }

// \n\W+?\n -> \n : lines holding only punctuation go.
std::string drop_punctuation_lines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t nl = text.find('\n', i);
    if (nl == npos) {
      out.append(text, i);
      break;
    }
    out.append(text, i, nl - i);
    i = nl;
    if (text[i] == '\n' && i + 1 < text.size()) {
      size_t n = 0;
      size_t j = i + 1;
      if (is_nonword_at(text, j, &n)) {
        j += n;
        while (j < text.size() && text[j] != '\n' && is_nonword_at(text, j, &n)) j += n;
        if (j < text.size() && text[j] == '\n') {
          out.push_back('\n');
          i = j + 1;
          continue;
        }
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

bool is_byte(std::string_view s, size_t i, unsigned char b) { return i < s.size() && static_cast<unsigned char>(s[i]) == b; }

// Tabs to spaces, runs of spaces to one, "...." to "...", no space before , : . ) ] » or after
// [ ( «, punctuation-only lines dropped, ",," and ",." tidied (clean()'s last steps, in order).
// Bytes that end a run of plain text in tidy_spacing().
constexpr std::array<bool, 256> kSpacingBytes = [] {
  std::array<bool, 256> t{};
  t[' '] = t['\t'] = t['.'] = true;
  return t;
}();

bool is_closer_at(std::string_view s, size_t i) {
  if (i >= s.size()) return false;
  const char c = s[i];
  return c == ',' || c == ':' || c == '.' || c == ')' || c == ']' || (is_byte(s, i, 0xC2) && is_byte(s, i + 1, 0xBB));
}

bool ends_with_opener(std::string_view s) {
  if (s.empty()) return false;
  return s.back() == '[' || s.back() == '(' || (s.size() >= 2 && is_byte(s, s.size() - 2, 0xC2) && is_byte(s, s.size() - 1, 0xAB));
}

// clean()'s last steps in one pass: tabs to spaces and runs of spaces to one, "...." to "...", no
// space before , : . ) ] » nor after [ ( «; then punctuation-only lines, ",," and ",.".
std::string tidy_spacing(const std::string& text) {
  std::string t(text.size(), '\0');  // the output is never longer: written in place
  char* const out = t.data();
  size_t w = 0;
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    while (j < text.size() && !kSpacingBytes[static_cast<unsigned char>(text[j])]) ++j;
    std::memcpy(out + w, text.data() + i, j - i);
    w += j - i;
    if (j == text.size()) break;
    i = j;
    if (text[i] == '.') {
      while (j < text.size() && text[j] == '.') ++j;
      const size_t dots = j - i >= 4 ? 3 : j - i;
      std::memset(out + w, '.', dots);
      w += dots;
    } else {
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
      if (!is_closer_at(text, j) && !ends_with_opener(std::string_view(out, w))) out[w++] = ' ';
    }
    i = j;
  }
  t.resize(w);
  t = drop_punctuation_lines(t);
  bool doubled_comma = false;  // most articles have none: one scan from comma to comma
  for (size_t c = t.find(','); c != npos && !doubled_comma; c = t.find(',', c + 1)) {
    doubled_comma = c + 1 < t.size() && (t[c + 1] == ',' || t[c + 1] == '.');
  }
  if (!doubled_comma) return t;
  t = replace_all(std::move(t), ",,", ",");
  return replace_all(std::move(t), ",.", ".");
}

// ---- the passes -------------------------------------------------------------------------------

constexpr std::array<std::string_view, 25> kIgnoredTags = {
    "abbr", "b", "bdi", "big", "blockquote", "cite", "div", "em", "font", "hiero", "i", "kbd", "nowiki",
    "plaintext", "poem", "s", "section", "span", "strike", "strong", "sub", "sup", "tt", "u", "var"};

constexpr std::array<std::string_view, 6> kSelfClosingTags = {"nobr", "ref", "references", "nowiki", "templatestyles",
                                                              "section"};

constexpr std::array<std::string_view, 31> kDiscardedElements = {
    "gallery", "timeline", "noinclude", "pre", "table", "tr", "td", "th", "caption", "div", "form",
    "input", "select", "option", "textarea", "ul", "li", "ol", "dl", "dt", "dd", "menu", "dir",
    "ref", "references", "img", "imagemap", "source", "small", "inputbox", "includeonly"};

std::string drop_tags_and_comments(std::string text) {
  std::vector<Span> spans;
  collect(text, find_comment, spans);
  const std::vector<std::string> present = tag_names(text);
  for (std::string_view tag : kSelfClosingTags) {
    if (!has(present, tag)) continue;
    if (tag == "nobr") {
      collect(text, opening_tag(tag, TagEnd::any), spans);
    } else {
      collect(text, opening_tag(tag, TagEnd::self_close), spans);
    }
  }
  for (std::string_view tag : kIgnoredTags) {
    if (!has(present, tag)) continue;
    collect(text, loose_opening_tag(tag), spans);
    collect(text, closing_tag(tag, false), spans);
  }
  if (has(present, "a")) {  // links are not kept
    collect(text, loose_opening_tag("a"), spans);
    collect(text, closing_tag("a", false), spans);
  }
  if (spans.empty()) return text;
  return drop_spans(std::move(spans), text);
}

std::string drop_discarded_elements(std::string text) {
  const std::vector<std::string> present = tag_names(text);
  for (std::string_view tag : kDiscardedElements) {
    if (!has(present, tag)) continue;
    text = drop_nested(text, opening_tag(tag, TagEnd::not_self_close), closing_tag(tag, true));
    std::vector<Span> orphans;
    collect(text, closing_tag(tag, true), orphans);
    text = drop_spans(std::move(orphans), text);
  }
  if (!has(present, "noinclude")) return text;
  std::vector<Span> noinclude;
  collect(text, [](std::string_view t, size_t from) -> Span {  // <\s*noinclude\s*/?\s*>
    for (size_t lt = t.find('<', from); lt != npos; lt = t.find('<', lt + 1)) {
      size_t i = skip_spaces(t, lt + 1);
      if (!starts_with_nocase(t, i, "noinclude")) continue;
      i = skip_spaces(t, i + 9);
      if (i < t.size() && t[i] == '/') i = skip_spaces(t, i + 1);
      if (i < t.size() && t[i] == '>') return {lt, i + 1};
    }
    return {};
  }, noinclude);
  collect(text, closing_tag("noinclude", true), noinclude);
  return drop_spans(std::move(noinclude), text);
}

// WikiExtractor's clean(): markup to text, still with its line structure.
std::string clean(std::string_view wikitext) {
  std::string text = drop_nested(wikitext, literal("{{"), literal("}}"));
  if (text.find("{|") != npos) text = drop_nested(text, literal("{|"), literal("|}"));
  text = replace_external_links(std::move(text));
  text = replace_internal_links(collapse_doubled_link_brackets(std::move(text)));
  text = drop_behaviour_switches(std::move(text));
  text = unwrap_syntaxhighlight(std::move(text));
  text = replace_bold_italic(std::move(text));
  const std::vector<std::string> present = tag_names(text);
  if (has(present, "br") || has(present, "hr")) {
    text = substitute_tags(text, " ", opening_tag("br", TagEnd::any), opening_tag("hr", TagEnd::any),
                           closing_tag("br", true), closing_tag("hr", true));
  }
  if (has(present, "p") || has(present, "center") || has(present, "h1") || has(present, "h2") || has(present, "h3") ||
      has(present, "h4")) {
    text = substitute_tags(text, "\n", loose_opening_tag("p"), closing_tag("p", false), loose_opening_tag("center"),
                           closing_tag("center", false), loose_opening_tag("h1"), closing_tag("h1", false),
                           loose_opening_tag("h2"), closing_tag("h2", false), loose_opening_tag("h3"),
                           closing_tag("h3", false), loose_opening_tag("h4"), closing_tag("h4", false));
  }
  text = drop_tags_and_comments(std::move(text));
  text = drop_discarded_elements(std::move(text));
  text = decode_entities(std::move(text));
  const std::vector<std::string> left = tag_names(text);
  if (has(left, "math")) text = replace_placeholders(std::move(text), "math", "formula");
  if (has(left, "code")) text = replace_placeholders(std::move(text), "code", "codice");
  text = replace_all(std::move(text), "<<", "«");
  text = replace_all(std::move(text), ">>", "»");
  return tidy_spacing(text);
}

// "== Title ==" at the start of a line: the level and the title, as (==+)\s*(.*?)\s*\1 matches.
// The title ends where the first later run of the same number of '=' starts, less the spaces
// before it. Runs longer than 64 are not headings (a bound that keeps hostile lines linear).
bool section_heading(std::string_view line, int& level, std::string_view& title) {
  size_t run = 0;
  while (run < line.size() && line[run] == '=') ++run;
  if (run > 64) return false;
  for (size_t g = run; g >= 2; --g) {
    const size_t begin = skip_spaces(line, g);
    const size_t e = line.find(std::string(g, '='), begin);
    if (e == npos) continue;
    size_t q = e;
    while (q > begin && is_space(code_point_before(line, q))) q = code_point_start_before(line, q);
    level = static_cast<int>(g);
    title = line.substr(begin, q - begin);
    return true;
  }
  return false;
}

// WikiExtractor's compact(): headings, lists, residues of tables, empty sections.
std::vector<std::string> compact(const std::string& text, const WikitextOptions& options) {
  std::vector<std::string> page;
  std::map<int, std::string> headers;  // headings of sections that have no paragraph yet
  bool empty_section = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == npos) nl = text.size();
    const std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    if (strip(line).empty()) continue;
    int level = 0;
    std::string_view heading;
    if (section_heading(line, level, heading)) {
      std::string title(heading);
      if (!title.empty() && title.back() != '!' && title.back() != '?') title += '.';
      headers[level] = title;
      headers.erase(headers.upper_bound(level), headers.end());
      empty_section = true;
      continue;
    }
    if (line.starts_with("++")) {
      std::string title(line.substr(2, line.size() >= 4 ? line.size() - 4 : 0));
      if (!title.empty()) {
        if (title.back() != '!' && title.back() != '?') title += '.';
        page.push_back(title);
      }
    } else if (line[0] == ':') {
      page.emplace_back(line.substr(line.find_first_not_of(':') == npos ? line.size() : line.find_first_not_of(':')));
    } else if (line[0] == '*' || line[0] == '#' || line[0] == ';') {
      continue;  // lists
    } else if (line[0] == '{' || line[0] == '|' || line.back() == '}') {
      continue;  // residues of tables and templates
    } else if ((line[0] == '(' && line.back() == ')') || line.find_first_not_of(".-") == npos) {
      continue;
    } else if (!headers.empty()) {
      if (options.keep_headings) {
        for (const auto& [l, h] : headers) page.push_back(h);
      }
      headers.clear();
      page.emplace_back(line);
      empty_section = false;
    } else if (!empty_section) {
      page.emplace_back(line);
    }
  }
  std::erase_if(page, [](const std::string& p) { return p.empty(); });
  return page;
}

}  // namespace

std::vector<std::string> wikitext_to_paragraphs(std::string_view wikitext, const WikitextOptions& options) {
  return compact(clean(wikitext), options);
}

}  // namespace bert
