// libFuzzer target: a .safetensors file (8-byte header length, JSON header, tensor bytes)
// through read_safetensors.
#include <cstdint>

#include "ckpt/safetensors.h"
#include "core/error.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "model.safetensors");
  try {
    (void)bert::read_safetensors(path);
  } catch (const bert::Error&) {
  }
  return 0;
}
