// Element types of tensors in the IR and at the API boundary. This file and
// dtype.cc hold Tiller's one table of them: names, sizes, numpy spellings.
// The public tiller::DataType (include/tiller/data_type.h) lists the same
// types in the same order, so the two convert by value (ToDataType /
// FromDataType, checked at compile time). Paddle's own dtype codes live in
// the Paddle frontend (frontend/paddle/dtype_codes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tiller {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI8, kU8, kI16, kI32, kI64, kBool };

struct DTypeInfo {
  DType type;
  const char* name;   // numpy-style: "float32", "int64", "bool", "bfloat16"
  size_t size;        // bytes per element
  const char* descr;  // numpy array-protocol string: "<f4", "|b1"; bfloat16 as its bits "<u2"
  bool is_float;
  bool is_integer;  // bool is neither float nor integer
};

const DTypeInfo& Info(DType t);
// Every DType, in enum order.
const std::vector<DType>& AllDTypes();

inline size_t DTypeSize(DType t) {
  return Info(t).size;
}
// Lower-case numpy-style name: "float32", "int64", "bool", "bfloat16".
inline const char* DTypeName(DType t) {
  return Info(t).name;
}
// Inverse of DTypeName; also accepts Paddle and C spellings ("fp32", "int64",
// "float", "double", "long"). Returns false for an unknown name.
bool ParseDType(std::string_view name, DType* out);
// Inverse of DTypeInfo::descr for little-endian or byte-order-free strings
// ("<f4", "|u1", "=i8"); "<u2" reads as bfloat16. False otherwise.
bool ParseNumpyDescr(std::string_view descr, DType* out);
inline bool IsFloat(DType t) {
  return Info(t).is_float;
}
// float16 or bfloat16.
inline bool IsHalf(DType t) {
  return t == DType::kF16 || t == DType::kBF16;
}
inline bool IsInteger(DType t) {
  return Info(t).is_integer;
}
// "float32, int64" for messages.
std::string DTypeList(const std::vector<DType>& types);

}  // namespace tiller
