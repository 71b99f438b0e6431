// Raw-text corpora for bert-prep: the list of input files (directories searched recursively for
// *.txt), an index of documents as byte ranges (blank-line separated, or one per file) built by
// one streaming pass, reading a document back, and splitting it into sentences. Only the index
// (16 bytes per document) stays in memory, so corpora larger than RAM work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bert {

struct CorpusFile {
  std::string path;
  uint64_t size = 0;
};

struct DocumentRange {
  uint32_t file = 0;
  uint64_t begin = 0, end = 0;  // byte range in the file
};

enum class DocumentMode { blank_line, file };  // documents separated by blank lines, or one per file
enum class SentenceMode { line, split };       // one sentence per line, or paragraphs split by rules

// Files as given, directories searched recursively for *.txt (sorted by path). Error(io) naming
// a missing path, Error(data) when no input file is found.
std::vector<CorpusFile> list_corpus_files(const std::vector<std::string>& inputs);

// Document ranges of all files in order; whitespace-only lines count as blank.
std::vector<DocumentRange> index_documents(const std::vector<CorpusFile>& files, DocumentMode mode);

// Reads document ranges back (one open file at a time); not shared between threads.
class DocumentReader {
 public:
  explicit DocumentReader(const std::vector<CorpusFile>& files) : files_(files) {}
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;
  void read(const DocumentRange& range, std::string& out);

 private:
  const std::vector<CorpusFile>& files_;
  int fd_ = -1;
  uint32_t open_file_ = 0;
};

// Sentences of a document's text: its non-blank lines (line mode), or the sentences of each
// paragraph of consecutive non-blank lines (split mode). Views point into `text`.
void document_sentences(std::string_view text, SentenceMode mode, std::vector<std::string_view>& out);

}  // namespace bert
