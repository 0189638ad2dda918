// Element types of tensors in the IR and at the API boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tiller {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI8, kU8, kI16, kI32, kI64, kBool };

size_t DTypeSize(DType t);
// Lower-case numpy-style name: "float32", "int64", "bool", "bfloat16".
const char* DTypeName(DType t);
// Inverse of DTypeName; also accepts Paddle spellings ("fp32", "int64").
// Returns false for an unknown name.
bool ParseDType(std::string_view name, DType* out);
bool IsFloat(DType t);
bool IsInteger(DType t);

}  // namespace tiller
