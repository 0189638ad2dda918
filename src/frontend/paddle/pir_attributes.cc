// PIR's typed JSON values as the reader takes them (pir_reader.h): whole
// integers, attributes ("#" kind, "D" data) into ir::Attribute, and dense
// tensor types into VarInfo. Kinds without IR meaning (places, types) are
// skipped; malformed values fail naming the op.
#include <cmath>
#include <limits>

#include "frontend/paddle/dtype_codes.h"
#include "frontend/paddle/pir_reader.h"

namespace tiller::paddle::pir {

int64_t ToInt64(const json& j) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return static_cast<int64_t>(j.get<uint64_t>());
  } else if (j.is_number_float()) {
    const double d = j.get<double>();
    // 2^63 is exactly representable; every double below it converts.
    if (std::trunc(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
      return static_cast<int64_t>(d);
  } else {
    return j.get<int64_t>();  // a signed integer, or a type_error naming the JSON type
  }
  throw json::type_error::create(302, "number " + j.dump() + " is not a 64-bit integer", &j);
}

std::vector<int64_t> ToInt64s(const json& j) {
  if (!j.is_array()) return j.get<std::vector<int64_t>>();  // throws type_error
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (const json& e : j) out.push_back(ToInt64(e));
  return out;
}

bool PirReader::ConvertAttr(const json& at, ir::Attribute* out, int depth) const {
  // Paddle writes an array of scalars at most (two levels).
  constexpr int kMaxAttrDepth = 16;
  if (depth > kMaxAttrDepth) {
    Corrupt(fmt::format("an attribute nests arrays and scalars deeper than {}", kMaxAttrDepth));
  }
  const std::string kind = Field(at, "#").get<std::string>();
  if (at.contains("VD")) {
    // NaN and infinities, which JSON cannot spell, are written as strings.
    std::string vd = at.at("VD").get<std::string>();
    double inf = std::numeric_limits<double>::infinity();
    if (vd == "NaN")
      *out = std::numeric_limits<double>::quiet_NaN();
    else if (vd == "INF")
      *out = inf;
    else if (vd == "-INF")
      *out = -inf;
    else
      Corrupt(fmt::format("unknown special float '{}'", vd));
    return true;
  }
  const json& d = at.contains("D") ? at.at("D") : kNoValue;
  if (kind == "0.a_bool")
    *out = d.get<bool>();
  else if (kind == "0.a_i32" || kind == "0.a_i64" || kind == "0.a_index")
    *out = ToInt64(d);
  else if (kind == "0.a_f32" || kind == "0.a_f64")
    *out = d.get<double>();
  else if (kind == "0.a_str")
    *out = d.get<std::string>();
  else if (kind == "1.a_intarray")
    *out = ToInt64s(d);
  else if (kind == "1.a_dtype") {
    // Legacy programs store dtypes as VarType codes; translation reads those.
    int64_t code;
    if (!VarTypeFromPirDTypeName(d.get<std::string>(), &code)) {
      Corrupt(fmt::format("unknown dtype '{}'", d.get<std::string>()));
    }
    *out = code;
  } else if (kind == "1.a_scalar" || kind == "1.a_layout") {
    if (d.is_object()) return ConvertAttr(d, out, depth + 1);
    if (d.is_boolean())
      *out = d.get<bool>();
    else if (d.is_number_integer())
      *out = ToInt64(d);
    else if (d.is_number())
      *out = d.get<double>();
    else if (d.is_string())
      *out = d.get<std::string>();
    else
      return false;
  } else if (kind == "0.a_array") {
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strs;
    bool any_float = false;
    for (const json& e : d) {
      ir::Attribute v;
      if (!ConvertAttr(e, &v, depth + 1)) return false;
      if (auto* s = std::get_if<std::string>(&v)) {
        strs.push_back(*s);
        continue;
      }
      double f = 0;
      if (auto* b = std::get_if<bool>(&v))
        f = *b, ints.push_back(*b);
      else if (auto* i = std::get_if<int64_t>(&v))
        f = static_cast<double>(*i), ints.push_back(*i);
      else if (auto* x = std::get_if<double>(&v))
        f = *x, any_float = true;
      else
        return false;
      floats.push_back(f);
    }
    if (!strs.empty()) {
      if (!floats.empty()) return false;
      *out = std::move(strs);
    } else if (any_float) {
      *out = std::move(floats);
    } else {
      *out = std::move(ints);  // an empty array is an empty int list
    }
  } else {
    // Places, types and other attributes with no IR meaning.
    return false;
  }
  return true;
}

ir::AttrMap PirReader::Attrs(const json& op) const {
  ir::AttrMap attrs;
  if (!op.contains("A")) return attrs;
  for (const json& a : op.at("A")) {
    ir::Attribute v;
    if (ConvertAttr(Field(a, "AT"), &v)) attrs.Set(AttrName(a), std::move(v));
  }
  return attrs;
}

VarInfo PirReader::VarFromType(const std::string& name, const json* type) const {
  VarInfo v;
  v.name = name;
  v.is_dense_tensor = false;
  const std::string kind = type && type->is_object() ? type->value("#", "") : "";
  // A sparse COO tensor (paddle.sparse): legacy VarType 30, SPARSE_COO.
  if (kind == "1.t_sparse_coo_tensor") v.var_type = 30;
  if (kind != "0.t_dtensor" && kind != "1.t_sparse_coo_tensor") return v;
  const json& d = Field(*type, "D");
  if (!d.is_array() || d.size() < 2) Corrupt(fmt::format("bad tensor type of '{}'", name));
  static const std::map<std::string, DType> kTypes = {
      {"0.t_f32", DType::kF32},  {"0.t_f16", DType::kF16}, {"0.t_bf16", DType::kBF16},
      {"0.t_f64", DType::kF64},  {"0.t_i8", DType::kI8},   {"0.t_ui8", DType::kU8},
      {"0.t_i16", DType::kI16},  {"0.t_i32", DType::kI32}, {"0.t_i64", DType::kI64},
      {"0.t_bool", DType::kBool}};
  auto it = kTypes.find(Field(d[0], "#").get<std::string>());
  v.dims = ToInt64s(d[1]);
  if (it == kTypes.end()) return v;  // complex and other element types
  v.dtype = it->second;
  v.is_dense_tensor = v.var_type != 30;
  return v;
}

}  // namespace tiller::paddle::pir
