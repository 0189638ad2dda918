// A kernel's dtype signature over all of an op's tensors, so a kernel says
// exactly which combinations it runs ("bf16 in, fp32 out" included) and the
// registry can hold several kernels for one op, picked by dtypes.
//
//   "T, T -> T"           T is a type variable: every T is the same dtype
//   "T, I -> T"           with .Where("I", {DType::kI32, DType::kI64})
//   "T, T -> bool"        a concrete dtype, by its name (core/dtype.h)
//   "T, T? -> T"          ?: an optional input (an absent one matches)
//   "T... -> T"           ...: zero or more further tensors like the last entry
//   "* -> T"              *: any dtype
//   " -> T"               no inputs (random ops)
// Type variables start with an upper-case letter; each needs a Where() with
// the dtypes it may take. The "primary" variable is T if there is one, else
// the first: its dtypes are what `tiller ops` lists and what
// tests/cpp/kernel_dtypes_test.cc runs, so T should be the data operand.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "ir/graph.h"

namespace tiller::backend {

class Signature {
 public:
  // No default constructor: a registration always states its signature (and
  // `{}` stays the empty dtype list of the older registration form).
  // Parses `spec`; a malformed one is an internal error naming it.
  explicit Signature(std::string_view spec);
  Signature(const char* spec) : Signature(std::string_view(spec)) {}  // NOLINT: literals

  // The dtypes variable `var` may take.
  Signature& Where(const std::string& var, std::vector<DType> types) &;
  Signature&& Where(const std::string& var, std::vector<DType> types) && {
    return std::move(Where(var, std::move(types)));
  }

  // The signature of a registration that declares the dtypes of one input
  // (or of output 0 for ops without inputs) and nothing else:
  // "*, ..., T, *... -> *..." with T = `types` at position `input`.
  static Signature OneInput(std::vector<DType> types, int input);

  // Whether the op's tensors fit; on a mismatch, why: "dtype int32 of input 0
  // 'x' is not supported (supported: float32, float64)".
  std::optional<std::string> Mismatch(const ir::Op& op) const;
  // The primary variable's dtypes (empty when it has none).
  const std::vector<DType>& primary_types() const;
  const std::string& spec() const { return spec_; }
  // The spec with its variables' dtypes: "T, T -> T (T: float32, int64)".
  std::string Describe() const;
  // Checks that every variable has dtypes; an internal error otherwise.
  void Validate(const std::string& what) const;

 private:
  struct Entry {
    std::string var;  // a type variable, "" for concrete or any
    DType type = DType::kF32;
    bool any = false, optional = false;
  };
  struct Side {
    std::vector<Entry> entries;
    bool variadic = false;  // the last entry repeats
  };
  static Side ParseSide(std::string_view text, std::string_view spec);
  const std::vector<DType>* TypesOf(const std::string& var) const;

  std::string spec_;
  Side inputs_, outputs_;
  bool outputs_only_without_inputs_ = false;  // OneInput: outputs checked for input-less ops
  std::vector<std::pair<std::string, std::vector<DType>>> vars_;  // in first-use order
};

}  // namespace tiller::backend
