// The storage type of activation tensors and the small views the Ops take them as. A backend
// stores every activation (and its gradient) in one type, Ops::activation_type(): fp32 on the
// CPU, bf16/fp16 on the CUDA backend in those precisions. Act / ConstAct are a pointer plus that
// type, built implicitly from float* / const float* as fp32, so fp32 callers pass plain pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace bert {

enum class DType : uint8_t { f32, bf16, f16 };

constexpr size_t dtype_bytes(DType type) { return type == DType::f32 ? 4 : 2; }

inline const char* dtype_name(DType type) {
  switch (type) {
    case DType::f32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::f16: return "fp16";
  }
  return "?";
}

// A writable activation tensor: data (backend memory, may be null) stored as `type`.
struct Act {
  void* data = nullptr;
  DType type = DType::f32;

  constexpr Act() = default;
  constexpr Act(std::nullptr_t) {}
  constexpr Act(float* p) : data(p) {}
  constexpr Act(void* p, DType t) : data(p), type(t) {}

  // The fp32 storage (null stays null); Error(internal) when the tensor is 16-bit.
  float* f32() const {
    BERT_CHECK(type == DType::f32 || data == nullptr, Code::internal, "a ", dtype_name(type),
               " activation tensor where fp32 storage is needed");
    return static_cast<float*>(data);
  }
  // The view `elems` elements further on (pointer arithmetic in the storage type).
  Act operator+(int64_t elems) const {
    return Act(static_cast<char*>(data) + elems * static_cast<int64_t>(dtype_bytes(type)), type);
  }
};

// A read-only activation tensor.
struct ConstAct {
  const void* data = nullptr;
  DType type = DType::f32;

  constexpr ConstAct() = default;
  constexpr ConstAct(std::nullptr_t) {}
  constexpr ConstAct(const float* p) : data(p) {}
  constexpr ConstAct(const void* p, DType t) : data(p), type(t) {}
  constexpr ConstAct(Act a) : data(a.data), type(a.type) {}

  const float* f32() const {
    BERT_CHECK(type == DType::f32 || data == nullptr, Code::internal, "a ", dtype_name(type),
               " activation tensor where fp32 storage is needed");
    return static_cast<const float*>(data);
  }
  ConstAct operator+(int64_t elems) const {
    return ConstAct(static_cast<const char*>(data) + elems * static_cast<int64_t>(dtype_bytes(type)), type);
  }
};

}  // namespace bert
