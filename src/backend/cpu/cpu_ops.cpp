// The CPU backend factory and constructor: picks the thread count every op runs with and
// whether dense layers take bf16 inputs.
#include "backend/cpu/cpu_ops.h"

#include <omp.h>

#include "core/error.h"

namespace bert {

CpuOps::CpuOps(int threads, bool bf16_gemm_inputs)
    : threads_(threads > 0 ? threads : omp_get_num_procs()),
      bf16_gemm_inputs_(bf16_gemm_inputs),
      packed_gemm_(!bf16_gemm_inputs && packed_gemm_supported()) {
  BERT_CHECK(!bf16_gemm_inputs || cpu_has_native_bf16(), Code::unsupported,
             "config key 'train.precision' = \"bf16\" on the CPU needs a CPU that multiplies bf16 natively "
             "(AVX512-BF16 or AMX); this one offers ", cpu_isa_name(), ". Use \"fp32\" here.");
}

std::unique_ptr<Ops> make_cpu_ops(int threads, Precision precision) {
  BERT_CHECK(precision == Precision::fp32 || precision == Precision::bf16, Code::unsupported,
             "config key 'train.precision' = \"", precision_name(precision),
             "\" is not available on the CPU (fp32, or bf16 on CPUs that multiply bf16 natively)");
  return std::make_unique<CpuOps>(threads, precision == Precision::bf16);
}

}  // namespace bert
