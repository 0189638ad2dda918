// How a Paddle 3 PIR op (pd_op dialect) maps onto its legacy ProgramDesc
// spelling: op type, one input slot per operand, output slots, attribute
// renames. Used by the PIR reader so translation handles one spelling.
// Every entry is registered with RegisterPirOpCompat in translate/<family>.cc,
// beside the translator of the legacy op it maps to.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/attribute.h"

namespace tiller::paddle {

// How one PIR operand becomes legacy inputs/attributes.
enum class OperandKind {
  kTensor,    // bound to `slot`; a builtin.combine value binds all its parts
  kIntArray,  // IntArray argument: a pd_op.full_int_array producer folds into
              // attribute `attr`; any other single tensor binds `slot` (a 1-D
              // int tensor); a builtin.combine binds `list_slot` (0-D parts)
  kScalar,    // Scalar argument: a one-element pd_op.full producer folds into
              // attribute `attr` (int64 for integer dtypes, else double);
              // anything else binds `slot`
  kDrop,      // not used by the legacy op (e.g. assign_value_'s output buffer)
};

struct OperandSpec {
  OperandKind kind = OperandKind::kTensor;
  std::string slot;
  std::string attr;       // kIntArray, kScalar
  std::string list_slot;  // kIntArray
};

struct PirOpCompat {
  std::string legacy_type;
  std::vector<OperandSpec> operands;                              // by PIR operand position
  std::vector<std::string> outputs;                               // by PIR result position
  std::vector<std::pair<std::string, std::string>> attr_renames;  // PIR name -> legacy name
  ir::AttrMap fixed_attrs;  // legacy attributes with no PIR counterpart
};

// `name` without the dialect prefix ("matmul" for pd_op.matmul). In-place
// variants ("relu_") resolve to their base op when they have no entry of
// their own. nullptr for ops without an entry.
const PirOpCompat* FindPirOpCompat(const std::string& name);

// Every entry, sorted by PIR name.
std::vector<std::pair<std::string, const PirOpCompat*>> AllPirOpCompat();

// Adds an entry from a translator's file, next to the translator of the
// legacy op it maps to (translate/<family>.cc; an entry whose legacy op has
// no translator goes with the ops of its family), at static-initialization
// time. A name already in the table is an internal error.
bool RegisterPirOpCompat(const std::string& pir_name, PirOpCompat entry);

// Builders for OperandSpec and for the common entry shapes.
namespace pir {
inline OperandSpec T(const char* slot) {
  return {OperandKind::kTensor, slot, "", ""};
}
inline OperandSpec IntArray(const char* attr, const char* slot, const char* list_slot) {
  return {OperandKind::kIntArray, slot, attr, list_slot};
}
inline OperandSpec Scalar(const char* attr, const char* slot) {
  return {OperandKind::kScalar, slot, attr, ""};
}
inline OperandSpec Drop() {
  return {OperandKind::kDrop, "", "", ""};
}
// X -> Out with attribute renames and fixed legacy attributes.
inline PirOpCompat Unary(const char* legacy,
                         std::vector<std::pair<std::string, std::string>> renames = {},
                         ir::AttrMap fixed = {}) {
  return {legacy, {T("X")}, {"Out"}, std::move(renames), std::move(fixed)};
}
// X, Y -> Out of a legacy elementwise/compare op. Those carry `axis`; PIR
// broadcasts numpy-style, which is axis = -1.
inline PirOpCompat Binary(const char* legacy) {
  return {legacy, {T("X"), T("Y")}, {"Out"}, {}, {{"axis", int64_t{-1}}}};
}
// X, axis -> attr dim of a legacy reduce op. reduce_all is derived from `dim`
// by the reader (empty dim = all axes).
inline PirOpCompat Reduce(const char* legacy) {
  return {legacy,
          {T("X"), IntArray("dim", "DimTensor", "DimTensorList")},
          {"Out"},
          {{"keepdim", "keep_dim"}, {"dtype", "out_dtype"}},
          {}};
}
}  // namespace pir

}  // namespace tiller::paddle
