// libFuzzer target: TFRecord files (length, masked CRC-32C of the length, record, CRC of the
// record) through TfRecordReader, each record through parse_example; and the input itself as
// one record, so the Example protobuf parser is reached past the CRCs.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "prep/tfrecord.h"
#include "fuzz_common.h"

namespace {

void parse(const std::string& record) {
  try {
    (void)bert::parse_example(record, "fuzz record");
  } catch (const bert::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  parse(std::string(reinterpret_cast<const char*>(data), size));
  const std::string path = fuzz::write_input(data, size, "records.tfrecord");
  try {
    bert::TfRecordReader reader(path);
    std::string record;
    while (reader.next(record)) parse(record);
  } catch (const bert::Error&) {
  }
  return 0;
}
