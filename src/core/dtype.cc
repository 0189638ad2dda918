#include "core/dtype.h"

#include <array>
#include <utility>

namespace tiller {
namespace {

// Indexed by DType's value.
constexpr std::array<DTypeInfo, 10> kTable = {{
    {DType::kF32, "float32", 4, "<f4", true, false},
    {DType::kF16, "float16", 2, "<f2", true, false},
    {DType::kBF16, "bfloat16", 2, "<u2", true, false},
    {DType::kF64, "float64", 8, "<f8", true, false},
    {DType::kI8, "int8", 1, "|i1", false, true},
    {DType::kU8, "uint8", 1, "|u1", false, true},
    {DType::kI16, "int16", 2, "<i2", false, true},
    {DType::kI32, "int32", 4, "<i4", false, true},
    {DType::kI64, "int64", 8, "<i8", false, true},
    {DType::kBool, "bool", 1, "|b1", false, false},
}};

constexpr bool TableInOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].type) != i) return false;
  }
  return true;
}
static_assert(TableInOrder(), "kTable rows must follow DType's order");

}  // namespace

const DTypeInfo& Info(DType t) {
  return kTable[static_cast<size_t>(t)];
}

const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const DTypeInfo& i : kTable) v.push_back(i.type);
    return v;
  }();
  return all;
}

bool ParseDType(std::string_view name, DType* out) {
  for (const DTypeInfo& i : kTable) {
    if (name == i.name) {
      *out = i.type;
      return true;
    }
  }
  static const std::array<std::pair<std::string_view, DType>, 7> kAliases = {{
      {"fp32", DType::kF32},
      {"fp16", DType::kF16},
      {"bf16", DType::kBF16},
      {"fp64", DType::kF64},
      {"float", DType::kF32},
      {"double", DType::kF64},
      {"long", DType::kI64},
  }};
  for (const auto& [n, t] : kAliases) {
    if (n == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool ParseNumpyDescr(std::string_view descr, DType* out) {
  if (descr.size() < 2) return false;
  char order = descr[0];
  if (order != '<' && order != '|' && order != '=') return false;
  for (const DTypeInfo& i : kTable) {
    if (descr.substr(1) == std::string_view(i.descr).substr(1)) {
      *out = i.type;
      return true;
    }
  }
  return false;
}

std::string DTypeList(const std::vector<DType>& types) {
  std::string s;
  for (DType t : types) s += (s.empty() ? "" : ", ") + std::string(DTypeName(t));
  return s;
}

}  // namespace tiller
