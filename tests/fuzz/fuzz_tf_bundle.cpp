// libFuzzer target: a TensorFlow 1 checkpoint — the SSTable index (blocks, CRCs, footer) and the
// BundleEntryProtos through read_tf_bundle, then every tensor through read_tf_tensor. Input: a
// 4-byte little-endian length of the index file, the index file, then the data file.
#include <cstdint>
#include <cstring>
#include <string>

#include "ckpt/tf_bundle.h"
#include "core/error.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t index_size = 0;
  std::memcpy(&index_size, data, 4);
  if (index_size > size - 4) index_size = static_cast<uint32_t>(size - 4);
  const std::string index = fuzz::write_input(data + 4, index_size, "model.ckpt.index");
  fuzz::write_input(data + 4 + index_size, size - 4 - index_size, "model.ckpt.data-00000-of-00001");
  const std::string prefix = index.substr(0, index.size() - 6);
  try {
    const bert::TfBundle bundle = bert::read_tf_bundle(prefix);
    for (const bert::TfBundleEntry& e : bundle.entries) {
      try {
        (void)bert::read_tf_tensor(bundle, e);
      } catch (const bert::Error&) {
      }
    }
  } catch (const bert::Error&) {
  }
  return 0;
}
