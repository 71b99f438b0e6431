// Shared by the libFuzzer targets: the input written to a per-process file (the parsers under
// test read files), and the rule that a parser may refuse input only with bert::Error; any other
// exception escapes and libFuzzer reports it, as it reports crashes, leaks and sanitizer findings.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {

// Writes data to /tmp/bert-fuzz-<pid>-<name> (overwritten at each input) and returns the path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = "/tmp/bert-fuzz-" + std::to_string(getpid()) + "-" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace fuzz
