// libFuzzer target: a checkpoint file through read_checkpoint_summary (used to tell runs apart)
// and read_checkpoint — the seal (userblock header, length, CRC-32C of the whole file), then
// format version, attributes, tensor index and checksum of what HDF5 parsed. Inputs that start
// with HDF5's signature are files without a seal, which go to HDF5 unchecked as before seals
// (libhdf5 1.10.8 crashes on some corrupt ones, see tests/fuzz/README.md): they are skipped here.
#include <cstdint>
#include <cstring>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 8 && std::memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0) return -1;  // not added to the corpus
  const std::string path = fuzz::write_input(data, size, "ckpt.h5");
  try {
    (void)bert::read_checkpoint_summary(path);
  } catch (const bert::Error&) {
  }
  try {
    (void)bert::read_checkpoint(path);
  } catch (const bert::Error&) {
  }
  return 0;
}
