#include "ir/attribute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace tiller::ir {

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
