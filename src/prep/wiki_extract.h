// Wikipedia dump -> the plain-text corpus `bert-prep shards` reads: main-namespace articles that
// are not redirects, converted to paragraphs (one line each), a blank line after each article,
// written in dump order to DIR/wiki_00000.txt, DIR/wiki_00001.txt, ... of about `shard_bytes`.
// Pages are converted on `threads` threads; a multistream dump with its index is also decoded in
// parallel. DIR/wiki.done is written last: a run that fails removes what it wrote, one killed
// leaves files the next run removes before it starts again (and that unfinished_extraction()
// reports), and a finished run of the same dumps and options is kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prep/wikitext.h"

namespace bert {

struct WikiExtractOptions {
  std::vector<std::string> dumps;  // .xml or .xml.bz2 (single- or multistream)
  std::string index;               // a multistream dump's index (only with one dump)
  std::string output_dir;
  WikitextOptions text;
  uint64_t shard_bytes = 128ull << 20;
  int threads = 1;
  bool overwrite = false;  // replace a finished extraction of other dumps or options
};

struct WikiExtractSummary {
  uint64_t pages = 0, articles = 0, redirects = 0, other_namespaces = 0, empty_articles = 0;
  uint64_t input_bytes = 0, wikitext_bytes = 0, text_bytes = 0;
  uint64_t removed_partial_files = 0;  // left by an interrupted run
  std::vector<std::string> files;
  double seconds = 0;
  bool up_to_date = false;  // a finished extraction of the same dumps and options was kept
};

WikiExtractSummary extract_wikipedia(const WikiExtractOptions& options);

// True when `dir` holds wiki_NNNNN.txt files but no wiki.done: an extraction that did not finish.
bool unfinished_extraction(const std::string& dir);

}  // namespace bert
