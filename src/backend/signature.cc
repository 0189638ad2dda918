#include "backend/signature.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace tiller::backend {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Signature::Side Signature::ParseSide(std::string_view text, std::string_view spec) {
  Side side;
  text = Trim(text);
  if (text.empty()) return side;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item = Trim(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    TILLER_CHECK(!side.variadic, "signature '{}': '...' must end its side", spec);
    Entry e;
    if (item.size() > 3 && item.substr(item.size() - 3) == "...") {
      side.variadic = true;
      item = Trim(item.substr(0, item.size() - 3));
    }
    if (!item.empty() && item.back() == '?') {
      e.optional = true;
      item = Trim(item.substr(0, item.size() - 1));
    }
    TILLER_CHECK(!item.empty(), "signature '{}': empty entry", spec);
    if (item == "*") {
      e.any = true;
    } else if (std::isupper(static_cast<unsigned char>(item.front()))) {
      e.var = std::string(item);
    } else {
      TILLER_CHECK(ParseDType(item, &e.type), "signature '{}': '{}' is not a dtype", spec, item);
    }
    side.entries.push_back(std::move(e));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return side;
}

Signature::Signature(std::string_view spec) : spec_(spec) {
  size_t arrow = spec.find("->");
  TILLER_CHECK(arrow != std::string_view::npos, "signature '{}' has no '->'", spec);
  inputs_ = ParseSide(spec.substr(0, arrow), spec);
  outputs_ = ParseSide(spec.substr(arrow + 2), spec);
  for (const Side* side : {&inputs_, &outputs_}) {
    for (const Entry& e : side->entries) {
      if (e.var.empty()) continue;
      bool seen =
          std::any_of(vars_.begin(), vars_.end(), [&](const auto& v) { return v.first == e.var; });
      if (!seen) vars_.emplace_back(e.var, std::vector<DType>{});
    }
  }
}

Signature& Signature::Where(const std::string& var, std::vector<DType> types) & {
  for (auto& [name, t] : vars_) {
    if (name == var) {
      TILLER_CHECK(!types.empty(), "signature '{}': no dtypes for {}", spec_, var);
      t = std::move(types);
      return *this;
    }
  }
  Fail(ErrorKind::kInternal, "signature '{}' has no type variable {}", spec_, var);
}

Signature Signature::OneInput(std::vector<DType> types, int input) {
  TILLER_CHECK(input >= 0, "dtype input {} < 0", input);
  std::string spec;
  for (int i = 0; i < input; ++i) spec += "*?, ";
  spec += "T?, *... -> *...";
  Signature s(spec);
  // Ops without inputs declare their first output instead.
  s.outputs_.entries.front() = Entry{"T"};
  s.outputs_.entries.push_back(Entry{"", DType::kF32, true});
  s.outputs_only_without_inputs_ = true;
  s.spec_ = fmt::format("dtypes of input {} (or of output 0 without inputs)", input);
  s.Where("T", std::move(types));
  return s;
}

const std::vector<DType>* Signature::TypesOf(const std::string& var) const {
  for (const auto& [name, t] : vars_) {
    if (name == var) return &t;
  }
  return nullptr;
}

const std::vector<DType>& Signature::primary_types() const {
  static const std::vector<DType> none;
  if (const std::vector<DType>* t = TypesOf("T")) return *t;
  return vars_.empty() ? none : vars_.front().second;
}

void Signature::Validate(const std::string& what) const {
  for (const auto& [name, t] : vars_)
    TILLER_CHECK(!t.empty(), "{}: signature '{}' gives no dtypes for {}", what, spec_, name);
}

std::optional<std::string> Signature::Mismatch(const ir::Op& op) const {
  std::vector<std::pair<std::string, DType>> bound;
  auto check = [&](const Side& side, const std::vector<ir::Value*>& values,
                   const char* kind) -> std::optional<std::string> {
    const size_t n = side.entries.size();
    if (values.size() > n && !side.variadic)
      return fmt::format("{} has {} {}s, the kernel takes {}", op.type, values.size(), kind, n);
    for (size_t i = 0; i < std::max(values.size(), n); ++i) {
      const Entry& e = side.entries[std::min(i, n - 1)];
      // A variadic tail may be empty; an optional entry may be absent.
      bool may_be_absent = e.optional || (side.variadic && i + 1 >= n);
      const ir::Value* v = i < values.size() ? values[i] : nullptr;
      if (!v) {
        if (!may_be_absent) return fmt::format("{} {} is required", kind, i);
        continue;
      }
      if (e.any) continue;
      DType t = v->dtype();
      std::vector<DType> allowed;
      if (e.var.empty()) {
        allowed = {e.type};
      } else {
        auto b = std::find_if(bound.begin(), bound.end(),
                              [&](const auto& x) { return x.first == e.var; });
        if (b != bound.end()) {
          allowed = {b->second};
        } else {
          allowed = *TypesOf(e.var);
          if (std::find(allowed.begin(), allowed.end(), t) != allowed.end())
            bound.emplace_back(e.var, t);
        }
      }
      if (std::find(allowed.begin(), allowed.end(), t) == allowed.end())
        return fmt::format("dtype {} of {} {} '{}' is not supported (supported: {})", DTypeName(t),
                           kind, i, v->name, DTypeList(allowed));
    }
    return std::nullopt;
  };
  if (auto m = check(inputs_, op.inputs, "input")) return m;
  if (outputs_only_without_inputs_ && !op.inputs.empty()) return std::nullopt;
  return check(outputs_, op.outputs, "output");
}

std::string Signature::Describe() const {
  std::string vars;
  for (const auto& [var, types] : vars_) {
    std::string names;
    for (DType t : types) names += (names.empty() ? "" : ", ") + std::string(DTypeName(t));
    vars += (vars.empty() ? "" : "; ") + var + ": " + names;
  }
  return vars.empty() ? spec_ : spec_ + " (" + vars + ")";
}

}  // namespace tiller::backend
