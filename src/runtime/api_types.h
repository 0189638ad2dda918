// Conversions between the public API's DataType and the core DType, shared
// by the predictor and the training session.
#pragma once

#include "core/dtype.h"
#include "tiller/predictor.h"

namespace tiller::inference {

inline DataType ToApi(DType t) {
  switch (t) {
    case DType::kF32: return DataType::FLOAT32;
    case DType::kF16: return DataType::FLOAT16;
    case DType::kBF16: return DataType::BFLOAT16;
    case DType::kF64: return DataType::FLOAT64;
    case DType::kI8: return DataType::INT8;
    case DType::kU8: return DataType::UINT8;
    case DType::kI16: return DataType::INT16;
    case DType::kI32: return DataType::INT32;
    case DType::kI64: return DataType::INT64;
    case DType::kBool: return DataType::BOOL;
  }
  return DataType::FLOAT32;
}

inline DType FromApi(DataType t) {
  switch (t) {
    case DataType::FLOAT32: return DType::kF32;
    case DataType::FLOAT16: return DType::kF16;
    case DataType::BFLOAT16: return DType::kBF16;
    case DataType::FLOAT64: return DType::kF64;
    case DataType::INT8: return DType::kI8;
    case DataType::UINT8: return DType::kU8;
    case DataType::INT16: return DType::kI16;
    case DataType::INT32: return DType::kI32;
    case DataType::INT64: return DType::kI64;
    case DataType::BOOL: return DType::kBool;
  }
  return DType::kF32;
}

}  // namespace tiller::inference
