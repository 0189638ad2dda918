// Element types and host tensors at the API boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tiller {

// The element types Tiller's tensors can have, in Paddle Inference's
// spelling. (The order is Tiller's internal one; do not rely on values.)
enum class DataType { FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT8, UINT8, INT16, INT32, INT64, BOOL };

// Bytes per element.
size_t SizeOf(DataType t);
// numpy's name: "float32", "int64", "bool", "bfloat16".
const char* DataTypeName(DataType t);
// Inverse of DataTypeName; also accepts Paddle spellings ("fp32", "bf16").
bool ParseDataType(const std::string& name, DataType* out);
// numpy's array-protocol string ("<f4", "|b1"); bfloat16 is carried as its
// raw bits, "<u2", because numpy has no bfloat16.
const char* NumpyDescr(DataType t);
// Inverse of NumpyDescr for little-endian or byte-order-free strings.
bool ParseNumpyDescr(const std::string& descr, DataType* out);

// A dense tensor in host memory, C order.
struct HostTensor {
  DataType dtype = DataType::FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // numel * SizeOf(dtype) bytes

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace tiller
