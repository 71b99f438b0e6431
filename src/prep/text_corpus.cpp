// Input listing, the streaming document indexer, and document reading with pread.
#include "prep/text_corpus.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "prep/sentence_splitter.h"

namespace bert {
namespace fs = std::filesystem;
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), is_space);
}

}  // namespace

std::vector<CorpusFile> list_corpus_files(const std::vector<std::string>& inputs) {
  std::vector<CorpusFile> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) fail(Code::io, "input '", input, "' does not exist");
    if (fs::is_directory(st)) {
      std::vector<CorpusFile> found;
      for (auto it = fs::recursive_directory_iterator(input, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file() && it->path().extension() == ".txt") {
          found.push_back({it->path().string(), static_cast<uint64_t>(it->file_size())});
        }
      }
      if (ec) fail(Code::io, "cannot list directory '", input, "': ", ec.message());
      std::sort(found.begin(), found.end(), [](const CorpusFile& a, const CorpusFile& b) { return a.path < b.path; });
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back({input, static_cast<uint64_t>(fs::file_size(input, ec))});
      if (ec) fail(Code::io, "cannot read input '", input, "': ", ec.message());
    }
  }
  if (files.empty()) fail(Code::data, "no input text files (*.txt) found in the given inputs");
  if (files.size() > UINT32_MAX) fail(Code::invalid_argument, "too many input files");
  return files;
}

std::vector<DocumentRange> index_documents(const std::vector<CorpusFile>& files, DocumentMode mode) {
  std::vector<DocumentRange> docs;
  std::vector<char> buf(1 << 20);
  for (uint32_t f = 0; f < files.size(); ++f) {
    if (mode == DocumentMode::file) {
      if (files[f].size > 0) docs.push_back({f, 0, files[f].size});
      continue;
    }
    int fd = ::open(files[f].path.c_str(), O_RDONLY);
    if (fd < 0) fail(Code::io, "cannot open '", files[f].path, "': ", std::strerror(errno));
    uint64_t offset = 0;        // file offset of buf[0]
    uint64_t line_begin = 0;    // file offset of the current line
    bool line_blank = true;
    bool doc_open = false;
    uint64_t doc_begin = 0;
    auto end_line = [&](uint64_t next_line_begin) {
      if (line_blank) {
        if (doc_open) docs.push_back({f, doc_begin, line_begin});
        doc_open = false;
      } else if (!doc_open) {
        doc_open = true;
        doc_begin = line_begin;
      }
      line_begin = next_line_begin;
      line_blank = true;
    };
    for (;;) {
      ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got < 0) {
        int err = errno;
        ::close(fd);
        fail(Code::io, "error reading '", files[f].path, "': ", std::strerror(err));
      }
      if (got == 0) break;
      for (ssize_t i = 0; i < got; ++i) {
        char c = buf[static_cast<size_t>(i)];
        if (c == '\n') {
          end_line(offset + static_cast<uint64_t>(i) + 1);
        } else if (!is_space(c)) {
          line_blank = false;
        }
      }
      offset += static_cast<uint64_t>(got);
    }
    ::close(fd);
    if (line_begin < offset) end_line(offset);
    line_begin = offset;
    if (doc_open) docs.push_back({f, doc_begin, offset});
  }
  return docs;
}

DocumentReader::~DocumentReader() {
  if (fd_ >= 0) ::close(fd_);
}

void DocumentReader::read(const DocumentRange& range, std::string& out) {
  if (fd_ < 0 || open_file_ != range.file) {
    if (fd_ >= 0) ::close(fd_);
    const std::string& path = files_[range.file].path;
    fd_ = ::open(path.c_str(), O_RDONLY);
    if (fd_ < 0) fail(Code::io, "cannot open '", path, "': ", std::strerror(errno));
    open_file_ = range.file;
  }
  out.resize(range.end - range.begin);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(range.begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      fail(Code::io, "cannot read bytes ", range.begin, "-", range.end, " of '", files_[range.file].path,
           "' (file changed while processing?)");
    }
    done += static_cast<size_t>(got);
  }
}

void document_sentences(std::string_view text, SentenceMode mode, std::vector<std::string_view>& out) {
  out.clear();
  size_t pos = 0;
  size_t para_begin = std::string_view::npos, para_end = 0;
  auto flush_paragraph = [&] {
    if (para_begin != std::string_view::npos) split_sentences(text.substr(para_begin, para_end - para_begin), out);
    para_begin = std::string_view::npos;
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    if (!blank(line)) {
      if (mode == SentenceMode::line) {
        while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
        while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
        out.push_back(line);
      } else {
        if (para_begin == std::string_view::npos) para_begin = pos;
        para_end = end;
      }
    } else if (mode == SentenceMode::split) {
      flush_paragraph();
    }
    pos = end + 1;
  }
  if (mode == SentenceMode::split) flush_paragraph();
}

}  // namespace bert
