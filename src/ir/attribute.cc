#include "ir/attribute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace tiller::ir {

const char* AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "int list";
    case AttrKind::kFloats:
      return "float list";
    case AttrKind::kStrings:
      return "string list";
  }
  return "?";
}

bool ConvertAttribute(const Attribute& a, AttrKind kind, Attribute* out) {
  if (KindOf(a) == kind) {
    *out = a;
    return true;
  }
  auto empty_list = [&] {
    if (auto* v = std::get_if<std::vector<int64_t>>(&a)) return v->empty();
    if (auto* v = std::get_if<std::vector<double>>(&a)) return v->empty();
    if (auto* v = std::get_if<std::vector<std::string>>(&a)) return v->empty();
    return false;
  };
  switch (kind) {
    case AttrKind::kBool:
      if (auto* v = std::get_if<int64_t>(&a); v && (*v == 0 || *v == 1)) {
        *out = *v == 1;
        return true;
      }
      return false;
    case AttrKind::kInt:
      if (auto* v = std::get_if<bool>(&a)) {
        *out = int64_t{*v ? 1 : 0};
        return true;
      }
      if (auto* v = std::get_if<double>(&a);
          v && *v == static_cast<double>(static_cast<int64_t>(*v))) {
        *out = static_cast<int64_t>(*v);
        return true;
      }
      return false;
    case AttrKind::kFloat:
      if (auto* v = std::get_if<int64_t>(&a)) {
        *out = static_cast<double>(*v);
        return true;
      }
      if (auto* v = std::get_if<bool>(&a)) {
        *out = *v ? 1.0 : 0.0;
        return true;
      }
      return false;
    case AttrKind::kString:
      return false;
    case AttrKind::kInts:
      if (auto* v = std::get_if<int64_t>(&a)) {
        *out = std::vector<int64_t>{*v};
        return true;
      }
      if (empty_list()) {
        *out = std::vector<int64_t>{};
        return true;
      }
      return false;
    case AttrKind::kFloats:
      if (auto* v = std::get_if<std::vector<int64_t>>(&a)) {
        *out = std::vector<double>(v->begin(), v->end());
        return true;
      }
      if (auto* v = std::get_if<double>(&a)) {
        *out = std::vector<double>{*v};
        return true;
      }
      if (auto* v = std::get_if<int64_t>(&a)) {
        *out = std::vector<double>{static_cast<double>(*v)};
        return true;
      }
      if (empty_list()) {
        *out = std::vector<double>{};
        return true;
      }
      return false;
    case AttrKind::kStrings:
      if (auto* v = std::get_if<std::string>(&a)) {
        *out = std::vector<std::string>{*v};
        return true;
      }
      if (empty_list()) {
        *out = std::vector<std::string>{};
        return true;
      }
      return false;
  }
  return false;
}

std::string AttributeToString(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return fmt::format("\"{}\"", v);
        } else {
          return fmt::format("{}", v);
        }
      },
      a);
}

const Attribute* AttrMap::Find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t AttrMap::Int(const std::string& name, int64_t fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<int64_t>(a)) return *v;
  if (auto* v = std::get_if<bool>(a)) return *v ? 1 : 0;
  if (auto* v = std::get_if<double>(a)) return static_cast<int64_t>(*v);
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not an integer", name, AttributeToString(*a));
}

double AttrMap::Float(const std::string& name, double fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<double>(a)) return *v;
  if (auto* v = std::get_if<int64_t>(a)) return static_cast<double>(*v);
  if (auto* v = std::get_if<bool>(a)) return *v ? 1.0 : 0.0;
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not a number", name, AttributeToString(*a));
}

bool AttrMap::Bool(const std::string& name, bool fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<bool>(a)) return *v;
  if (auto* v = std::get_if<int64_t>(a)) return *v != 0;
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not a bool", name, AttributeToString(*a));
}

std::string AttrMap::Str(const std::string& name, const std::string& fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<std::string>(a)) return *v;
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not a string", name, AttributeToString(*a));
}

std::vector<int64_t> AttrMap::Ints(const std::string& name, std::vector<int64_t> fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<std::vector<int64_t>>(a)) return *v;
  if (auto* v = std::get_if<int64_t>(a)) return {*v};
  if (auto* v = std::get_if<std::vector<double>>(a)) {
    if (v->empty()) return {};
  }
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not an int list", name, AttributeToString(*a));
}

std::vector<double> AttrMap::Floats(const std::string& name, std::vector<double> fallback) const {
  const Attribute* a = Find(name);
  if (!a) return fallback;
  if (auto* v = std::get_if<std::vector<double>>(a)) return *v;
  if (auto* v = std::get_if<std::vector<int64_t>>(a)) return {v->begin(), v->end()};
  if (auto* v = std::get_if<double>(a)) return {*v};
  Fail(ErrorKind::kInternal, "attribute '{}' = {} is not a float list", name,
       AttributeToString(*a));
}

}  // namespace tiller::ir
