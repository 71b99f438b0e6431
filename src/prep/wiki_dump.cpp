// Dump reading: a file reader, a bz2 decoder that continues across concatenated streams, and an
// expat handler that assembles pages; the multistream index reader.
#include "prep/wiki_dump.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>

#include <bzlib.h>
#include <expat.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"

namespace bert {
namespace {

constexpr size_t kChunk = 1u << 16;  // compressed bytes decoded at a time: bounds the XML held

class File {
 public:
  explicit File(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail(Code::io, "cannot open '", path, "': ", std::strerror(errno));
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Up to `size` bytes at `offset` (fewer only at the end of the file).
  size_t read_at(uint64_t offset, char* data, size_t size) const {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_, data + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(Code::io, "cannot read '", path_, "' at byte ", offset + done, ": ", std::strerror(errno));
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

  uint64_t size() const {
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end < 0) fail(Code::io, "cannot size '", path_, "': ", std::strerror(errno));
    return static_cast<uint64_t>(end);
  }

 private:
  std::string path_;
  int fd_;
};

// Decompresses a sequence of concatenated bz2 streams (a multistream dump is many).
class Bz2Decoder {
 public:
  explicit Bz2Decoder(std::string path) : path_(std::move(path)) { start(); }
  ~Bz2Decoder() { BZ2_bzDecompressEnd(&stream_); }
  Bz2Decoder(const Bz2Decoder&) = delete;
  Bz2Decoder& operator=(const Bz2Decoder&) = delete;

  // Decodes `in` (compressed bytes starting at file offset `offset`), appending to `out`.
  void decode(const char* in, size_t size, uint64_t offset, std::string& out) {
    stream_.next_in = const_cast<char*>(in);
    stream_.avail_in = static_cast<unsigned>(size);
    char buffer[1 << 16];
    while (stream_.avail_in > 0) {
      if (ended_) {  // another stream follows
        BZ2_bzDecompressEnd(&stream_);
        const char* next = stream_.next_in;
        const unsigned left = stream_.avail_in;
        start();
        stream_.next_in = const_cast<char*>(next);
        stream_.avail_in = left;
      }
      stream_.next_out = buffer;
      stream_.avail_out = sizeof buffer;
      const uint64_t at = offset + (size - stream_.avail_in);
      const int rc = BZ2_bzDecompress(&stream_);
      out.append(buffer, sizeof buffer - stream_.avail_out);
      if (rc == BZ_STREAM_END) {
        ended_ = true;
        ++streams_;
      } else if (rc != BZ_OK) {
        fail(Code::data, "'", path_, "': corrupt bz2 data near compressed byte ", at, " (stream ", streams_ + 1, ", ",
             rc == BZ_DATA_ERROR_MAGIC ? "not bz2 data" : "bad block", ")");
      }
    }
  }

  // After the last byte: the last stream must have ended.
  void finish(uint64_t size) const {
    if (!ended_) fail(Code::data, "'", path_, "': the bz2 data ends inside stream ", streams_ + 1, " at byte ", size, " (truncated?)");
  }
  uint64_t streams() const { return streams_; }

 private:
  void start() {
    std::memset(&stream_, 0, sizeof stream_);
    if (BZ2_bzDecompressInit(&stream_, 0, 0) != BZ_OK) fail(Code::io, "cannot start a bz2 decoder");
    ended_ = false;
  }
  std::string path_;
  bz_stream stream_{};
  bool ended_ = false;
  uint64_t streams_ = 0;
};

// Assembles <page> elements from expat's events. Element names are matched by their parent so
// that a <title> or <id> elsewhere (siteinfo, contributor) is not taken for the page's.
class PageAssembler {
 public:
  PageAssembler(std::string source, const PageSink& sink) : source_(std::move(source)), sink_(sink) {
    parser_ = XML_ParserCreate("UTF-8");
    if (parser_ == nullptr) fail(Code::io, "cannot create an XML parser");
    XML_SetUserData(parser_, this);
    XML_SetElementHandler(parser_, &PageAssembler::on_start, &PageAssembler::on_end);
    XML_SetCharacterDataHandler(parser_, &PageAssembler::on_text);
  }
  ~PageAssembler() { XML_ParserFree(parser_); }
  PageAssembler(const PageAssembler&) = delete;
  PageAssembler& operator=(const PageAssembler&) = delete;

  // `where` describes the position for error messages (e.g. the compressed offset).
  void feed(std::string_view xml, bool last, const std::string& where) {
    const XML_Status status = XML_Parse(parser_, xml.data(), static_cast<int>(xml.size()), last ? 1 : 0);
    if (sink_error_) std::rethrow_exception(sink_error_);
    if (status == XML_STATUS_OK && error_.empty()) return;
    if (error_.empty()) {
      error_ = std::string(XML_ErrorString(XML_GetErrorCode(parser_))) + " at XML line " +
               std::to_string(XML_GetCurrentLineNumber(parser_)) + ", column " +
               std::to_string(XML_GetCurrentColumnNumber(parser_)) + " (byte " +
               std::to_string(XML_GetCurrentByteIndex(parser_)) + " of the XML)";
    }
    fail(Code::data, source_, ": malformed dump: ", error_, where, "; ",
         last_title_.empty() ? std::string("no article read before it") : "after article '" + last_title_ + "'",
         in_page_ && !page_.title.empty() ? ", inside article '" + page_.title + "'" : std::string());
  }
  uint64_t pages() const { return pages_; }

 private:
  enum class Field { none, title, id, ns, text };

  static void on_start(void* self, const XML_Char* name, const XML_Char** attributes) {
    static_cast<PageAssembler*>(self)->start(name, attributes);
  }
  static void on_end(void* self, const XML_Char* name) { static_cast<PageAssembler*>(self)->end(name); }
  static void on_text(void* self, const XML_Char* text, int size) {
    static_cast<PageAssembler*>(self)->text(std::string_view(text, static_cast<size_t>(size)));
  }

  void start(std::string_view name, const XML_Char** /*attributes*/) {
    // Decided before the push below, which may reallocate the stack the parent's name lives in.
    const bool page_child = in_page_ && !path_.empty() && path_.back() == "page";
    const bool revision_child = in_page_ && !path_.empty() && path_.back() == "revision";
    path_.emplace_back(name);
    field_ = Field::none;
    if (name == "page") {
      if (in_page_) stop("a <page> inside a <page>");
      in_page_ = true;
      page_ = WikiPage{};
      has_id_ = false;
    } else if (page_child && name == "title") {
      field_ = Field::title;
    } else if (page_child && name == "ns") {
      field_ = Field::ns;
    } else if (page_child && name == "id" && !has_id_) {
      field_ = Field::id;
    } else if (page_child && name == "redirect") {
      page_.redirect = true;
    } else if (revision_child && name == "text") {
      field_ = Field::text;
      page_.text.clear();
    }
  }


  void end(std::string_view name) {
    if (field_ == Field::id) has_id_ = true;
    field_ = Field::none;
    if (!path_.empty()) path_.pop_back();
    if (name == "page" && in_page_) {
      in_page_ = false;
      last_title_ = page_.title;
      ++pages_;
      try {  // no exception may cross expat's C frames
        sink_(std::move(page_));
      } catch (...) {
        sink_error_ = std::current_exception();
        XML_StopParser(parser_, XML_FALSE);
      }
    }
  }

  void text(std::string_view chunk) {
    std::string* target = nullptr;
    switch (field_) {
      case Field::title: target = &page_.title; break;
      case Field::id: target = &page_.id; break;
      case Field::ns: target = &page_.ns; break;
      case Field::text: target = &page_.text; break;
      case Field::none: return;
    }
    if (target->size() + chunk.size() > kMaxWikiPageBytes) {
      stop("article '" + page_.title + "' is larger than " + std::to_string(kMaxWikiPageBytes >> 20) + " MiB");
    }
    target->append(chunk);
  }

  // Stops the parser from inside a handler; feed() reports `why`.
  void stop(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    XML_StopParser(parser_, XML_FALSE);
  }

  std::string source_;
  const PageSink& sink_;
  XML_Parser parser_;
  std::vector<std::string> path_;
  Field field_ = Field::none;
  bool in_page_ = false, has_id_ = false;
  WikiPage page_;
  std::string last_title_, error_;
  std::exception_ptr sink_error_;
  uint64_t pages_ = 0;
};

bool starts_bz2(std::string_view head) { return head.size() >= 3 && head.substr(0, 3) == "BZh"; }

// A whole file's bytes, decompressed when it is bz2 (for the small index file).
std::string read_whole(const std::string& path) {
  File file(path);
  std::string raw(file.size(), '\0');
  raw.resize(file.read_at(0, raw.data(), raw.size()));
  if (!starts_bz2(raw)) return raw;
  std::string out;
  Bz2Decoder decoder(path);
  decoder.decode(raw.data(), raw.size(), 0, out);
  decoder.finish(raw.size());
  return out;
}

}  // namespace

bool looks_like_wiki_dump(const std::string& path) {
  File file(path);
  char head[4096];
  const std::string_view h(head, file.read_at(0, head, sizeof head));
  return starts_bz2(h) || h.find("<mediawiki") != std::string_view::npos;
}

void read_wiki_dump(const std::string& path, const PageSink& sink, const std::function<void(uint64_t)>& on_bytes) {
  File file(path);
  PageAssembler pages(path, sink);
  std::unique_ptr<Bz2Decoder> bz2;
  std::string chunk(kChunk, '\0'), xml;
  uint64_t offset = 0;
  for (;;) {
    const size_t n = file.read_at(offset, chunk.data(), chunk.size());
    if (offset == 0 && starts_bz2(std::string_view(chunk.data(), n))) bz2 = std::make_unique<Bz2Decoder>(path);
    const std::string where = bz2 ? " (compressed byte " + std::to_string(offset) + "+)" : "";
    if (n == 0) {
      if (bz2) bz2->finish(offset);
      pages.feed({}, true, where);
      break;
    }
    if (bz2) {
      xml.clear();
      bz2->decode(chunk.data(), n, offset, xml);
      pages.feed(xml, false, where);
    } else {
      pages.feed(std::string_view(chunk.data(), n), false, where);
    }
    offset += n;
    if (on_bytes) on_bytes(offset);
  }
}

std::vector<uint64_t> read_multistream_index(const std::string& index_path, const std::string& dump_path) {
  const File dump(dump_path);
  const uint64_t dump_size = dump.size();
  const std::string text = read_whole(index_path);
  std::vector<uint64_t> offsets;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view entry(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    uint64_t offset = 0;
    bool ok = colon != std::string_view::npos && colon > 0 && colon <= 19;
    for (size_t i = 0; ok && i < colon; ++i) {
      ok = entry[i] >= '0' && entry[i] <= '9';
      offset = offset * 10 + static_cast<uint64_t>(entry[i] - '0');
    }
    if (!ok) fail(Code::data, "'", index_path, "' line ", line, ": not 'offset:page_id:title': '", std::string(entry.substr(0, 80)), "'");
    if (offset >= dump_size) fail(Code::data, "'", index_path, "' line ", line, ": offset ", offset, " is beyond the dump's ", dump_size, " bytes");
    if (offsets.empty() || offsets.back() != offset) {
      char head[4] = {};
      if (dump.read_at(offset, head, sizeof head) != sizeof head || !starts_bz2(std::string_view(head, 3)) || head[3] < '1' ||
          head[3] > '9') {
        fail(Code::data, "'", index_path, "' line ", line, ": no bz2 stream starts at byte ", offset, " of '", dump_path,
             "' (is the index for this dump?)");
      }
      offsets.push_back(offset);
    }
  }
  if (offsets.empty()) fail(Code::data, "'", index_path, "' lists no streams");
  if (!std::is_sorted(offsets.begin(), offsets.end())) fail(Code::data, "'", index_path, "': offsets are not ascending");
  if (offsets.front() != 0) offsets.insert(offsets.begin(), 0);  // the header stream (siteinfo) is not indexed
  offsets.push_back(dump_size);
  return offsets;
}

void read_wiki_stream_range(const std::string& path, uint64_t begin, uint64_t end, const PageSink& sink) {
  File file(path);
  std::string raw(end - begin, '\0');
  if (file.read_at(begin, raw.data(), raw.size()) != raw.size()) {
    fail(Code::data, "'", path, "': bytes ", begin, "-", end, " of the index are beyond the end of the file");
  }
  std::string xml;
  Bz2Decoder bz2(path);
  bz2.decode(raw.data(), raw.size(), begin, xml);
  bz2.finish(end);
  // The pages of the range, without the dump's header (<mediawiki>, <siteinfo>) or its closing tag.
  const size_t first = xml.find("<page>");
  const size_t last = xml.rfind("</page>");
  const std::string where = " (in the bz2 streams at bytes " + std::to_string(begin) + "-" + std::to_string(end) + ")";
  const std::string_view head(xml.data(), first == std::string::npos ? xml.size() : first);
  if (begin != 0 && head.find_first_not_of(" \t\r\n") != std::string_view::npos) {
    fail(Code::data, "'", path, "': the bz2 stream at byte ", begin, " does not start at a <page> (is the index for this dump?)");
  }
  if (first == std::string::npos) return;
  const std::string_view tail = std::string_view(xml).substr(last == std::string::npos ? first : last + 7);
  const size_t tail_text = tail.find_first_not_of(" \t\r\n");
  if (tail_text != std::string_view::npos && tail.substr(tail_text, 12) != "</mediawiki>") {
    fail(Code::data, "'", path, "': the bz2 streams at bytes ", begin, "-", end,
         " end inside a page (is the index for this dump?)");
  }
  PageAssembler pages(path, sink);
  pages.feed("<pages>", false, where);
  pages.feed(std::string_view(xml).substr(first, last == std::string::npos ? xml.size() - first : last + 7 - first), false, where);
  pages.feed("</pages>", true, where);
}

}  // namespace bert
