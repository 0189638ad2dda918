// Program/OpDesc accessors and the helpers shared by the readers.
#include "frontend/paddle/program.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace {

const std::vector<std::string>& FindSlot(const std::vector<Slot>& slots, const std::string& name) {
  static const std::vector<std::string> kEmpty;
  for (const auto& [slot, args] : slots) {
    if (slot == name) return args;
  }
  return kEmpty;
}

}  // namespace

const std::vector<std::string>& OpDesc::Inputs(const std::string& slot) const {
  return FindSlot(inputs, slot);
}

const std::vector<std::string>& OpDesc::Outputs(const std::string& slot) const {
  return FindSlot(outputs, slot);
}

std::string OpDesc::Describe() const {
  // The first output names the op the way Paddle's own messages and the
  // exported variable names do.
  for (const auto& [slot, args] : outputs) {
    if (!args.empty()) return fmt::format("{} #{} (out: {})", type, index, args[0]);
  }
  return fmt::format("{} #{}", type, index);
}

const VarInfo* Program::FindVar(const std::string& name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

bool DTypeFromVarType(int64_t code, DType* out) {
  switch (code) {
    case 0:
      *out = DType::kBool;
      return true;
    case 1:
      *out = DType::kI16;
      return true;
    case 2:
      *out = DType::kI32;
      return true;
    case 3:
      *out = DType::kI64;
      return true;
    case 4:
      *out = DType::kF16;
      return true;
    case 5:
      *out = DType::kF32;
      return true;
    case 6:
      *out = DType::kF64;
      return true;
    case 20:
      *out = DType::kU8;
      return true;
    case 21:
      *out = DType::kI8;
      return true;
    case 22:
      *out = DType::kBF16;
      return true;
    default:
      return false;
  }
}

int64_t VarTypeFromDType(DType t) {
  switch (t) {
    case DType::kBool:
      return 0;
    case DType::kI16:
      return 1;
    case DType::kI32:
      return 2;
    case DType::kI64:
      return 3;
    case DType::kF16:
      return 4;
    case DType::kF32:
      return 5;
    case DType::kF64:
      return 6;
    case DType::kU8:
      return 20;
    case DType::kI8:
      return 21;
    case DType::kBF16:
      return 22;
  }
  return -1;
}

std::string VarTypeName(int64_t code) {
  switch (code) {
    case 0:
      return "BOOL";
    case 1:
      return "INT16";
    case 2:
      return "INT32";
    case 3:
      return "INT64";
    case 4:
      return "FP16";
    case 5:
      return "FP32";
    case 6:
      return "FP64";
    case 7:
      return "DENSE_TENSOR";
    case 8:
      return "SELECTED_ROWS";
    case 9:
      return "FEED_MINIBATCH";
    case 10:
      return "FETCH_LIST";
    case 13:
      return "DENSE_TENSOR_ARRAY";
    case 17:
      return "RAW";
    case 19:
      return "SIZE_T";
    case 20:
      return "UINT8";
    case 21:
      return "INT8";
    case 22:
      return "BF16";
    case 23:
      return "COMPLEX64";
    case 24:
      return "COMPLEX128";
    case 25:
      return "STRING";
    case 26:
      return "STRINGS";
    case 28:
      return "FEED_LIST";
    case 32:
      return "FP8_E4M3FN";
    case 33:
      return "FP8_E5M2";
    case 36:
      return "UINT16";
    case 37:
      return "UINT32";
    case 38:
      return "UINT64";
    default:
      return fmt::format("type {}", code);
  }
}

bool VarTypeFromPirDTypeName(const std::string& name, int64_t* code) {
  // Spellings written by phi::DataTypeToString (verified with 3.3.1 exports).
  static const std::pair<const char*, int64_t> kNames[] = {
      {"bool", 0},           {"int16", 1},        {"int32", 2},
      {"int64", 3},          {"float16", 4},      {"float32", 5},
      {"float64", 6},        {"uint8", 20},       {"int8", 21},
      {"bfloat16", 22},      {"complex64", 23},   {"complex128", 24},
      {"uint16", 36},        {"uint32", 37},      {"uint64", 38},
      {"float8_e4m3fn", 32}, {"float8_e5m2", 33}, {"Undefined(ALL_DTYPE)", -1},
      {"Undefined", -1},
  };
  for (const auto& [n, c] : kNames) {
    if (name == n) {
      *code = c;
      return true;
    }
  }
  return false;
}

std::string ReadFileBytes(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Fail(ErrorKind::kInvalidArgument, "{} '{}' is a directory, expected a file", what, path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(ErrorKind::kNotFound, "{} '{}' not found or not readable", what, path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) Fail(ErrorKind::kDataLoss, "{} '{}': read error", what, path);
  return bytes;
}

}  // namespace tiller::paddle
