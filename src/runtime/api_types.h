// The public DataType (include/tiller/data_type.h) and the core DType list
// the same types in the same order (core/dtype.h holds the table), so they
// convert by value.
#pragma once

#include "core/dtype.h"
#include "tiller/data_type.h"

namespace tiller {

static_assert(static_cast<int>(DataType::FLOAT32) == static_cast<int>(DType::kF32) &&
                  static_cast<int>(DataType::FLOAT16) == static_cast<int>(DType::kF16) &&
                  static_cast<int>(DataType::BFLOAT16) == static_cast<int>(DType::kBF16) &&
                  static_cast<int>(DataType::FLOAT64) == static_cast<int>(DType::kF64) &&
                  static_cast<int>(DataType::INT8) == static_cast<int>(DType::kI8) &&
                  static_cast<int>(DataType::UINT8) == static_cast<int>(DType::kU8) &&
                  static_cast<int>(DataType::INT16) == static_cast<int>(DType::kI16) &&
                  static_cast<int>(DataType::INT32) == static_cast<int>(DType::kI32) &&
                  static_cast<int>(DataType::INT64) == static_cast<int>(DType::kI64) &&
                  static_cast<int>(DataType::BOOL) == static_cast<int>(DType::kBool),
              "tiller::DataType must list core DType's types in its order");

inline DataType ToApi(DType t) {
  return static_cast<DataType>(t);
}
inline DType FromApi(DataType t) {
  return static_cast<DType>(t);
}

namespace inference {
using ::tiller::FromApi;
using ::tiller::ToApi;
}  // namespace inference

}  // namespace tiller
