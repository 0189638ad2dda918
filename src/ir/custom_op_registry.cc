// The registry of loaded custom-op definitions and the attribute accessor of
// the C ABI (see custom_op_registry.h).
#include "ir/custom_op_registry.h"

#include <map>

namespace tiller::custom_op {
namespace {

struct Entry {
  const TillerCustomOpDef* def;
  std::string library;
};

std::map<std::string, Entry>& Ops() {
  static std::map<std::string, Entry> ops;
  return ops;
}

const ir::Attribute* Get(const TillerAttrs* a, const char* name) {
  return a && a->map && name ? a->map->Find(name) : nullptr;
}

int GetInt(const TillerAttrs* a, const char* name, int64_t* out) {
  const ir::Attribute* v = Get(a, name);
  if (!v) return 0;
  if (const auto* i = std::get_if<int64_t>(v))
    *out = *i;
  else if (const auto* b = std::get_if<bool>(v))
    *out = *b ? 1 : 0;
  else
    return 0;
  return 1;
}
int GetFloat(const TillerAttrs* a, const char* name, double* out) {
  const ir::Attribute* v = Get(a, name);
  if (!v) return 0;
  if (const auto* d = std::get_if<double>(v))
    *out = *d;
  else if (const auto* i = std::get_if<int64_t>(v))
    *out = static_cast<double>(*i);
  else if (const auto* b = std::get_if<bool>(v))
    *out = *b ? 1.0 : 0.0;
  else
    return 0;
  return 1;
}
int GetString(const TillerAttrs* a, const char* name, const char** out) {
  const ir::Attribute* v = Get(a, name);
  const auto* s = v ? std::get_if<std::string>(v) : nullptr;
  if (!s) return 0;
  *out = s->c_str();
  return 1;
}
int GetInts(const TillerAttrs* a, const char* name, const int64_t** out, int64_t* count) {
  const ir::Attribute* v = Get(a, name);
  const auto* s = v ? std::get_if<std::vector<int64_t>>(v) : nullptr;
  if (!s) return 0;
  *out = s->data();
  *count = static_cast<int64_t>(s->size());
  return 1;
}
int GetFloats(const TillerAttrs* a, const char* name, const double** out, int64_t* count) {
  const ir::Attribute* v = Get(a, name);
  const auto* s = v ? std::get_if<std::vector<double>>(v) : nullptr;
  if (!s) return 0;
  *out = s->data();
  *count = static_cast<int64_t>(s->size());
  return 1;
}

const TillerAttrApi kApi = {GetInt, GetFloat, GetString, GetInts, GetFloats};

}  // namespace

std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}

void Register(const TillerCustomOpDef* def, const std::string& library) {
  Ops()[def->paddle_type] = {def, library};
}

const TillerCustomOpDef* Find(const std::string& paddle_type) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Ops().find(paddle_type);
  return it == Ops().end() ? nullptr : it->second.def;
}

std::vector<std::pair<std::string, std::string>> Loaded() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [type, e] : Ops()) out.emplace_back(type, e.library);
  return out;
}

const TillerAttrApi* AttrApi() {
  return &kApi;
}

bool ToAbi(DType t, int32_t* out) {
  switch (t) {
    case DType::kF32:
      *out = TILLER_CUSTOM_F32;
      return true;
    case DType::kF64:
      *out = TILLER_CUSTOM_F64;
      return true;
    case DType::kI32:
      *out = TILLER_CUSTOM_I32;
      return true;
    case DType::kI64:
      *out = TILLER_CUSTOM_I64;
      return true;
    case DType::kBool:
      *out = TILLER_CUSTOM_BOOL;
      return true;
    default:
      return false;
  }
}

bool FromAbi(int32_t t, DType* out) {
  switch (t) {
    case TILLER_CUSTOM_F32:
      *out = DType::kF32;
      return true;
    case TILLER_CUSTOM_F64:
      *out = DType::kF64;
      return true;
    case TILLER_CUSTOM_I32:
      *out = DType::kI32;
      return true;
    case TILLER_CUSTOM_I64:
      *out = DType::kI64;
      return true;
    case TILLER_CUSTOM_BOOL:
      *out = DType::kBool;
      return true;
    default:
      return false;
  }
}

}  // namespace tiller::custom_op
