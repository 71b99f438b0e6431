// A reader of the protocol-buffer wire format (varints, 64/32-bit fixed, length-delimited
// fields), enough to decode the few messages we read without a protobuf library: TensorFlow's
// BundleHeaderProto/BundleEntryProto and tf.train.Example. Malformed input throws
// bert::Error(code) whose message starts with `context` (the file and record or tensor).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace bert {

// Reads a base-128 varint at p (advancing it); false if it runs past `end` or exceeds 64 bits.
bool read_varint(const char*& p, const char* end, uint64_t& value);

struct ProtoField {
  uint32_t number = 0;
  int wire_type = 0;       // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t value = 0;      // varint, fixed64 or fixed32 value
  std::string_view bytes;  // length-delimited payload
};

class ProtoReader {
 public:
  ProtoReader(std::string_view message, std::string context, Code code)
      : p_(message.data()), end_(message.data() + message.size()), context_(std::move(context)), code_(code) {}
  // The next field, or false at the end of the message.
  bool next(ProtoField& field);
  [[noreturn]] void malformed(const std::string& why) const;
  const std::string& context() const { return context_; }

 private:
  const char* p_;
  const char* end_;
  std::string context_;
  Code code_;
};

}  // namespace bert
