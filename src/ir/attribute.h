// Typed op attributes. Frontends convert framework attributes into these
// seven kinds; IR op schemas read them with defaults.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace tiller::ir {

using Attribute = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

std::string AttributeToString(const Attribute& a);

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, Attribute>> init) : map_(init) {}

  void Set(const std::string& name, Attribute v) { map_[name] = std::move(v); }
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
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
