#include "core/dtype.h"

#include <array>
#include <utility>

namespace tiller {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16: return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF64: return "float64";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI16: return "int16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kBool: return "bool";
  }
  return "?";
}

bool ParseDType(std::string_view name, DType* out) {
  static const std::array<std::pair<std::string_view, DType>, 17> kNames = {{
      {"float32", DType::kF32}, {"fp32", DType::kF32},    {"float16", DType::kF16},
      {"fp16", DType::kF16},    {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"float64", DType::kF64}, {"fp64", DType::kF64},    {"int8", DType::kI8},
      {"uint8", DType::kU8},    {"int16", DType::kI16},   {"int32", DType::kI32},
      {"int64", DType::kI64},   {"bool", DType::kBool},   {"float", DType::kF32},
      {"double", DType::kF64},  {"long", DType::kI64},
  }};
  for (const auto& [n, t] : kNames) {
    if (n == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool IsInteger(DType t) {
  return t == DType::kI8 || t == DType::kU8 || t == DType::kI16 || t == DType::kI32 ||
         t == DType::kI64;
}

}  // namespace tiller
