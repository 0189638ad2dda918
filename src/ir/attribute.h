// Typed op attributes. Frontends convert framework attributes into these
// seven kinds; each IR op schema declares its attributes with kind and
// default (op_schema.h), and ir::Op reads them typed (graph.h). AttrMap's
// getters with a fallback are for framework attributes (Paddle OpDesc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace tiller::ir {

using Attribute = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

// The seven kinds, in the variant's order (Attribute::index()).
enum class AttrKind : uint8_t { kBool, kInt, kFloat, kString, kInts, kFloats, kStrings };
const char* AttrKindName(AttrKind k);
inline AttrKind KindOf(const Attribute& a) {
  return static_cast<AttrKind>(a.index());
}
// Converts `a` to `kind` where no information is lost (int -> float,
// 0/1 -> bool, bool -> int, a whole float -> int, a scalar -> a one-element
// list, an empty list -> any list); false otherwise.
bool ConvertAttribute(const Attribute& a, AttrKind kind, Attribute* out);

std::string AttributeToString(const Attribute& a);

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, Attribute>> init) : map_(init) {}

  void Set(const std::string& name, Attribute v) { map_[name] = std::move(v); }
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
  void Erase(const std::string& name) { map_.erase(name); }
  const Attribute* Find(const std::string& name) const;

  // Typed getters: ints and bools convert into each other and into double;
  // a present attribute of an unconvertible kind is an internal error.
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Float(const std::string& name, double fallback) const;
  bool Bool(const std::string& name, bool fallback) const;
  std::string Str(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> Floats(const std::string& name, std::vector<double> fallback = {}) const;

  const std::map<std::string, Attribute>& all() const { return map_; }

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace tiller::ir
