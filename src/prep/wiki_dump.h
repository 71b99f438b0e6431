// Reading a MediaWiki XML export (a Wikipedia dump): pages streamed from .xml or .xml.bz2 (one or
// many bz2 streams) through expat, with memory bounded by one page; and the byte ranges of a
// multistream dump's streams (from its index) decoded independently, so they can be read in
// parallel. Corrupt or truncated input is an Error(data) naming the file, the byte offset and the
// last article read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bert {

struct WikiPage {
  std::string title;
  std::string id;
  std::string ns;  // the <ns> element's text ("0" for articles)
  bool redirect = false;
  std::string text;  // the last revision's wikitext, XML-decoded
};

// Called for each page in document order.
using PageSink = std::function<void(WikiPage&&)>;

// The largest page text accepted (Wikipedia's largest articles are a few MB).
constexpr size_t kMaxWikiPageBytes = 64u << 20;

// True when the file starts like a dump: bz2 data ("BZh") or XML holding "<mediawiki".
bool looks_like_wiki_dump(const std::string& path);

// Streams every page of the dump at `path` to `sink`; `on_bytes` gets the compressed bytes read so
// far (for progress), after each chunk.
void read_wiki_dump(const std::string& path, const PageSink& sink, const std::function<void(uint64_t)>& on_bytes);

// The start offsets of the bz2 streams of the multistream dump at `dump_path`, from its index
// ("offset:page_id:title" lines, plain or bz2), ascending and distinct, with the dump's size
// appended as the end of the last stream. Each offset must start a bz2 stream in the dump.
std::vector<uint64_t> read_multistream_index(const std::string& index_path, const std::string& dump_path);

// Decodes the whole bz2 streams in bytes [begin, end) of a multistream dump and streams their
// pages to `sink`. The first range may hold the <siteinfo> header and the last the closing tag.
void read_wiki_stream_range(const std::string& path, uint64_t begin, uint64_t end, const PageSink& sink);

}  // namespace bert
