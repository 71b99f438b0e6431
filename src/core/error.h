// Errors inside the engine: a typed exception carrying a bert_status code and a message.
// Code below the C API throws bert::Error; capi/bert_capi.cpp catches everything at the
// boundary and turns it into a status plus bert_last_error(). Library-specific check
// macros (HDF5, CUDA, cuBLAS, MPI, ...) live next to the code that calls the library.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace bert {

// Mirrors bert_status in capi/bert.h (kept numerically identical; checked by a static_assert there).
enum class Code : int {
  ok = 0,
  invalid_argument = 1,
  config = 2,
  io = 3,
  data = 4,
  checkpoint = 5,
  out_of_memory = 6,
  backend = 7,
  distributed = 8,
  aborted = 9,
  unsupported = 10,
  internal = 11,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

// Builds a message from any streamable pieces: fail(Code::config, "key '", k, "' ...").
template <typename... Parts>
[[noreturn]] void fail(Code code, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(code, os.str());
}

}  // namespace bert

#define BERT_CHECK(cond, code, ...)                 \
  do {                                              \
    if (!(cond)) ::bert::fail((code), __VA_ARGS__); \
  } while (0)
