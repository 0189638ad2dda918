#include "frontend/paddle/dtype_codes.h"

#include <fmt/format.h>

#include <optional>

namespace tiller::paddle {
namespace {

struct Code {
  int64_t code;
  const char* var_type;        // framework.proto's enum name
  const char* pir;             // PIR spelling ("" when none)
  std::optional<DType> dtype;  // none: not an element type Tiller runs
};

// framework.proto VarType.Type (verified against the 3.3.1 wheel's
// descriptor) and phi::DataTypeToString's spellings (verified with 3.3.1
// exports).
constexpr Code kCodes[] = {
    {0, "BOOL", "bool", DType::kBool},
    {1, "INT16", "int16", DType::kI16},
    {2, "INT32", "int32", DType::kI32},
    {3, "INT64", "int64", DType::kI64},
    {4, "FP16", "float16", DType::kF16},
    {5, "FP32", "float32", DType::kF32},
    {6, "FP64", "float64", DType::kF64},
    {7, "DENSE_TENSOR", "", std::nullopt},
    {8, "SELECTED_ROWS", "", std::nullopt},
    {9, "FEED_MINIBATCH", "", std::nullopt},
    {10, "FETCH_LIST", "", std::nullopt},
    {13, "DENSE_TENSOR_ARRAY", "", std::nullopt},
    {17, "RAW", "", std::nullopt},
    {19, "SIZE_T", "", std::nullopt},
    {20, "UINT8", "uint8", DType::kU8},
    {21, "INT8", "int8", DType::kI8},
    {22, "BF16", "bfloat16", DType::kBF16},
    {23, "COMPLEX64", "complex64", std::nullopt},
    {24, "COMPLEX128", "complex128", std::nullopt},
    {25, "STRING", "", std::nullopt},
    {26, "STRINGS", "", std::nullopt},
    {28, "FEED_LIST", "", std::nullopt},
    {32, "FP8_E4M3FN", "float8_e4m3fn", std::nullopt},
    {33, "FP8_E5M2", "float8_e5m2", std::nullopt},
    {36, "UINT16", "uint16", std::nullopt},
    {37, "UINT32", "uint32", std::nullopt},
    {38, "UINT64", "uint64", std::nullopt},
};

const Code* Find(int64_t code) {
  for (const Code& c : kCodes) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

}  // namespace

bool DTypeFromVarType(int64_t code, DType* out) {
  const Code* c = Find(code);
  if (!c || !c->dtype) return false;
  *out = *c->dtype;
  return true;
}

int64_t VarTypeFromDType(DType t) {
  for (const Code& c : kCodes) {
    if (c.dtype == t) return c.code;
  }
  return -1;
}

std::string VarTypeName(int64_t code) {
  const Code* c = Find(code);
  return c ? c->var_type : fmt::format("type {}", code);
}

bool VarTypeFromPirDTypeName(const std::string& name, int64_t* code) {
  if (name == "Undefined(ALL_DTYPE)" || name == "Undefined") {
    *code = -1;
    return true;
  }
  for (const Code& c : kCodes) {
    if (*c.pir && name == c.pir) {
      *code = c.code;
      return true;
    }
  }
  return false;
}

}  // namespace tiller::paddle
