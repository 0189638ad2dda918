// The PIR reader's insides (ReadPirProgram, pir_reader.cc), shared with
// pir_attributes.cc, which reads PIR's typed JSON values (whole integers,
// attributes, tensor types). Not a public interface.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "frontend/paddle/program.h"
#include "ir/attribute.h"

namespace tiller::paddle::pir {

using json = nlohmann::json;

// A JSON number as int64_t. nlohmann's get<int64_t>() casts a float that
// does not fit (-2.2e62 in a mutated file) with undefined behaviour; here a
// number that is not a whole int64 is a type error like any other.
int64_t ToInt64(const json& j);
// An array of them (a type_error for anything else).
std::vector<int64_t> ToInt64s(const json& j);

// What a missing "D" reads as. Always bound by reference: json() or
// value("D", json()) in its place copies "D" whole, recursively, and a value
// nested 10^6 deep overflowed the stack.
inline const json kNoValue;

struct Value {
  std::string name;
  const json* type = nullptr;
  std::string producer;        // op name, e.g. "1.matmul", "p"
  bool is_vec = false;         // a vector of values: combine result or multi-output
  bool rebinds = false;        // an in-place result reusing its operand's variable
  std::vector<int64_t> parts;  // element value ids when is_vec
  // Constant producers, for folding IntArray / Scalar operands.
  bool is_int_array = false;  // pd_op.full_int_array
  bool is_scalar = false;     // one-element pd_op.full
  std::vector<int64_t> ints;
  double scalar = 0;
  bool scalar_is_int = false;
};

struct Fetch {
  int64_t col;
  std::string name;
  int64_t value;
};

// Reads one program: Scan (pass 1), then Emit per op (pass 2), in
// pir_reader.cc; ConvertAttr, Attrs and VarFromType in pir_attributes.cc.
class PirReader {
 public:
  explicit PirReader(std::string path) : path_(std::move(path)) {}

  Program Read(const json& root);
  // "op 12 (1.matmul)" while an op is being read, for wrapped JSON errors.
  std::string Where() const {
    return op_index_ >= 0 ? fmt::format(" in op {} ({})", op_index_, op_name_) : std::string();
  }

 private:
  [[noreturn]] void Corrupt(const std::string& what) const {
    if (op_index_ >= 0) {
      Fail(ErrorKind::kDataLoss, "{}: malformed PIR program: op {} ({}): {}", path_, op_index_,
           op_name_, what);
    }
    Fail(ErrorKind::kDataLoss, "{}: malformed PIR program: {}", path_, what);
  }
  const json& Field(const json& obj, const char* key) const {
    if (!obj.is_object() || !obj.contains(key)) Corrupt(fmt::format("missing '{}'", key));
    return obj.at(key);
  }
  Value& Get(int64_t id) {
    auto it = values_.find(id);
    if (it == values_.end()) Corrupt(fmt::format("operand %{} is not defined before its use", id));
    return it->second;
  }
  std::vector<int64_t> OperandIds(const json& op) const;
  std::vector<std::pair<int64_t, const json*>> Results(const json& op) const;
  static std::string AttrName(const json& a) { return a.at("N").get<std::string>(); }
  // `depth` counts the scalars and arrays around `at`: a file may nest them
  // without end, and each level is a stack frame here.
  bool ConvertAttr(const json& at, ir::Attribute* out, int depth = 0) const;
  ir::AttrMap Attrs(const json& op) const;
  VarInfo VarFromType(const std::string& name, const json* type) const;
  std::vector<std::string> Args(int64_t id);
  void Scan(const json& op);
  void Emit(const json& op, int index, Program& prog);
  void AddVar(Program& prog, const VarInfo& v);

  std::string path_;
  int op_index_ = -1;
  std::string op_name_;
  std::map<int64_t, Value> values_;
  std::vector<Fetch> fetches_;
  std::vector<std::pair<int64_t, std::string>> feed_cols_;  // feed ops' (col, name)
  int64_t next_synthetic_ = int64_t{1} << 40;
  std::set<int> folded_constant_ops_;  // emitted op positions that may become dead
};

}  // namespace tiller::paddle::pir
