// Communicator defaults shared by every backend: the wire-precision names and the immediate
// (non-overlapping) form of start_allreduce_sum, and reduce-scatter as an all-reduce.
#include "dist/communicator.h"

#include "core/error.h"

namespace bert {

WirePrecision parse_wire_precision(const std::string& name) {
  if (name == "fp32") return WirePrecision::fp32;
  if (name == "bf16") return WirePrecision::bf16;
  if (name == "fp16") return WirePrecision::fp16;
  fail(Code::config, "config key 'dist.wire_precision' = \"", name, "\" is not one of: fp32, bf16, fp16");
}

const char* wire_precision_name(WirePrecision wire) {
  switch (wire) {
    case WirePrecision::fp32: return "fp32";
    case WirePrecision::bf16: return "bf16";
    case WirePrecision::fp16: return "fp16";
  }
  return "?";
}

void Communicator::start_allreduce_sum(float* data, int64_t n, WirePrecision wire, void*) {
  if (world_size() > 1 && wire != WirePrecision::fp32) {
    fail(Code::unsupported, "config key 'dist.wire_precision': the ", name(),
         " communicator reduces gradients in fp32 only");
  }
  allreduce_sum(data, n);
}

void Communicator::reduce_scatter_sum(float* data, const std::vector<int64_t>& counts) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  allreduce_sum(data, n);
}

}  // namespace bert
