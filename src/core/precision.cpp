// Names of the run precisions.
#include "core/precision.h"

#include "core/error.h"

namespace bert {

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16}) {
    if (name == precision_name(p)) return p;
  }
  fail(Code::invalid_argument, "precision '", name, "' is not one of \"fp32\", \"tf32\", \"bf16\", \"fp16\"");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

}  // namespace bert
