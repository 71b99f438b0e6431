// Rule-based sentence splitter for raw paragraphs (bert-prep shards --sentences split): breaks
// after . ! ? (and CJK 。！？) plus closing quotes/brackets when whitespace and a plausible
// sentence start follow, except after common abbreviations, single-letter initials, and numbers.
#pragma once

#include <string_view>
#include <vector>

namespace bert {

// Appends the sentences of `paragraph` (views into it, trimmed, non-empty) to `out`.
void split_sentences(std::string_view paragraph, std::vector<std::string_view>& out);

}  // namespace bert
