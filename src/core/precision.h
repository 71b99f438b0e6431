// The arithmetic precision of a run (config key train.precision): the dense layers' input type.
// Accumulation and the optimizer's state are fp32 in every case. Parsed from its name once, where
// the config is read; everything after decides on the enum.
#pragma once

#include <string>

namespace bert {

// fp32: fp32 inputs; tf32: fp32 inputs multiplied as TF32 (GPU tensor cores); bf16/fp16: 16-bit
// inputs (on the GPU also 16-bit activations).
enum class Precision { fp32, tf32, bf16, fp16 };

// Parses "fp32" | "tf32" | "bf16" | "fp16"; throws Error(invalid_argument) naming the value.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision precision);
inline bool is_16bit(Precision p) { return p == Precision::bf16 || p == Precision::fp16; }

}  // namespace bert
