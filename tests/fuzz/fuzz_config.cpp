// libFuzzer target: the session config JSON through parse_session_config, the parsing and
// validation bert_session_create applies before building a model.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "session/session_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const bert::SessionConfig c = bert::parse_session_config(std::string(reinterpret_cast<const char*>(data), size));
    (void)c.to_json().dump();
  } catch (const bert::Error&) {
  }
  return 0;
}
