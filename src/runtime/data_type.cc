// include/tiller/data_type.h over the core dtype table.
#include "tiller/data_type.h"

#include "runtime/api_types.h"

namespace tiller {

size_t SizeOf(DataType t) {
  return DTypeSize(FromApi(t));
}
const char* DataTypeName(DataType t) {
  return DTypeName(FromApi(t));
}
const char* NumpyDescr(DataType t) {
  return Info(FromApi(t)).descr;
}

bool ParseDataType(const std::string& name, DataType* out) {
  DType t;
  if (!ParseDType(name, &t)) return false;
  *out = ToApi(t);
  return true;
}

bool ParseNumpyDescr(const std::string& descr, DataType* out) {
  DType t;
  if (!ParseNumpyDescr(std::string_view(descr), &t)) return false;
  *out = ToApi(t);
  return true;
}

}  // namespace tiller
