// Wikitext (MediaWiki markup) to plain paragraphs, the way WikiExtractor cleans an article when it
// does not expand templates: templates and tables dropped (nested), links to their text, <ref>,
// comments, galleries, lists and other non-prose elements removed, <math>/<code> as placeholders,
// entities decoded, headings kept as "Heading." lines or dropped. Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bert {

struct WikitextOptions {
  bool keep_headings = true;  // a section heading becomes a line "History." before its first paragraph
};

// The article's paragraphs (and kept headings), one line each, in order; no empty lines. The input
// is the page text as the XML holds it after XML decoding.
std::vector<std::string> wikitext_to_paragraphs(std::string_view wikitext, const WikitextOptions& options);

}  // namespace bert
