// libFuzzer target: a checkpoint file (HDF5) through read_checkpoint — format version,
// attributes, tensor index, checksum — and read_checkpoint_state (used to tell runs apart).
#include <cstdint>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "ckpt.h5");
  try {
    (void)bert::read_checkpoint_state(path);
  } catch (const bert::Error&) {
  }
  try {
    (void)bert::read_checkpoint(path);
  } catch (const bert::Error&) {
  }
  return 0;
}
