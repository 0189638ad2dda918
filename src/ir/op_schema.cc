#include "ir/op_schema.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace tiller::ir {

namespace {
std::map<std::string, OpSchema>& Registry() {
  static std::map<std::string, OpSchema> registry;
  return registry;
}
}  // namespace

const TensorType& InferContext::input(size_t i) const {
  const Value* v = op_.input(i);
  if (!v) Fail("input {} is required", i);
  return v->type;
}

std::string ValuesAtLeastProblem(std::string_view attr, const std::vector<int64_t>& values,
                                 size_t count, int64_t least) {
  const bool below =
      std::any_of(values.begin(), values.end(), [least](int64_t v) { return v < least; });
  if (!below && (count == 0 || values.size() == count)) return "";
  return fmt::format("{} {} must be {}values >= {}", attr, ShapeToString(values),
                     count ? fmt::format("{} ", count) : "", least);
}

DType HalfSafeOutDType(const InferContext& c, DType operands) {
  const std::string& name = c.op().GetStr("out_dtype");
  if (name.empty()) return operands;
  DType out;
  if (!ParseDType(name, &out)) c.Fail("unknown out_dtype '{}'", name);
  if (out != operands && !(out == DType::kF32 && IsHalf(operands)))
    c.Fail("out_dtype {} for {} operands (only float16 / bfloat16 operands may give float32)",
           DTypeName(out), DTypeName(operands));
  return out;
}

const char* PrecisionRuleName(PrecisionRule r) {
  switch (r) {
    case PrecisionRule::kUndeclared:
      return "undeclared";
    case PrecisionRule::kAlwaysF32:
      return "always_fp32";
    case PrecisionRule::kHalfSafe:
      return "half_safe";
    case PrecisionRule::kFollowsInput:
      return "follows_input";
  }
  return "?";
}

const char* LayoutRuleName(LayoutRule r) {
  switch (r) {
    case LayoutRule::kUndeclared:
      return "undeclared";
    case LayoutRule::kAgnostic:
      return "agnostic";
    case LayoutRule::kAxisAttrs:
      return "axis_attrs";
    case LayoutRule::kDataFormat:
      return "data_format";
    case LayoutRule::kFixed:
      return "fixed";
  }
  return "?";
}

const AttrDecl* OpSchema::FindAttr(std::string_view attr) const {
  for (const AttrDecl& d : attrs) {
    if (d.name == attr) return &d;
  }
  return nullptr;
}

void OpSchema::AddAttr(std::string attr, Attribute default_value) {
  TILLER_CHECK(!FindAttr(attr), "op schema '{}' declares attribute '{}' twice", name, attr);
  AttrKind kind = KindOf(default_value);
  attrs.push_back({std::move(attr), kind, std::move(default_value)});
  attrs_declared = true;
}

OpSchema& OpSchema::RequiredAttr(std::string attr, AttrKind kind) & {
  TILLER_CHECK(!FindAttr(attr), "op schema '{}' declares attribute '{}' twice", name, attr);
  attrs.push_back({std::move(attr), kind, std::nullopt});
  attrs_declared = true;
  return *this;
}

void CheckAttributes(const OpSchema& schema, const std::string& op_name, AttrMap& attrs) {
  for (const auto& [key, value] : attrs.all()) {
    const AttrDecl* d = schema.FindAttr(key);
    if (!d) {
      if (schema.open_attrs) continue;
      std::string declared;
      for (const AttrDecl& a : schema.attrs) declared += (declared.empty() ? "" : ", ") + a.name;
      Fail(ErrorKind::kInternal, "op {} ({}): attribute '{}' is not declared by its schema ({})",
           schema.name, op_name, key, declared.empty() ? "it declares none" : declared);
    }
    if (KindOf(value) == d->kind) continue;
    Attribute converted;
    if (!ConvertAttribute(value, d->kind, &converted))
      Fail(ErrorKind::kInternal, "op {} ({}): attribute '{}' = {} is not a {}", schema.name,
           op_name, key, AttributeToString(value), AttrKindName(d->kind));
    attrs.Set(key, std::move(converted));
  }
  for (const AttrDecl& d : schema.attrs) {
    if (!d.default_value && !attrs.Has(d.name))
      Fail(ErrorKind::kInternal, "op {} ({}): required attribute '{}' is missing", schema.name,
           op_name, d.name);
  }
}

bool RegisterOpSchema(OpSchema schema) {
  TILLER_CHECK(schema.attrs_declared,
               "op schema '{}' does not declare its attributes (Attr / RequiredAttr, or NoAttrs)",
               schema.name);
  schema.opcode = OpcodeOf(schema.name);
  auto [it, inserted] = Registry().emplace(schema.name, std::move(schema));
  TILLER_CHECK(inserted, "op schema '{}' registered twice", it->first);
  return true;
}

const OpSchema* FindOpSchema(const std::string& name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> AllOpSchemaNames() {
  std::vector<std::string> names;
  for (const auto& [name, s] : Registry()) names.push_back(name);
  return names;
}

}  // namespace tiller::ir
