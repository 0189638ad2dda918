// ReadPirProgram: a Paddle 3 PIR program (model.json) into the neutral
// Program form, with pd_op ops renamed to their legacy spelling through
// FindPirOpCompat (pir_compat.h; the entries are registered beside their
// translators). Values become variables: "%<id>", except parameter
// results (their parameter_name), data results (the input's name) and values
// read by exactly one fetch (the fetch's name, which is the output name users
// see). builtin.combine/split/slice become multi-argument slots.
#include "frontend/paddle/pir_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/memory_cap.h"
#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace pir {
namespace {

// nlohmann's own DOM builder (what json::parse uses), checking the host
// memory budget every 65536 values it makes. json::parse with a callback
// would do the same, but its callback parser ran ~40x slower (10 s instead
// of 0.25 s for 12 MB).
class BudgetedDomParser : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  explicit BudgetedDomParser(json& root) : Base(root, /*allow_exceptions_=*/true) {}
  bool null() { return Tick() && Base::null(); }
  bool boolean(bool v) { return Tick() && Base::boolean(v); }
  bool number_integer(json::number_integer_t v) { return Tick() && Base::number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Tick() && Base::number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    return Tick() && Base::number_float(v, text);
  }
  bool string(json::string_t& v) { return Tick() && Base::string(v); }
  bool start_object(std::size_t n) { return Tick() && Base::start_object(n); }
  bool start_array(std::size_t n) { return Tick() && Base::start_array(n); }

 private:
  bool Tick() {
    if (++values_ % 65536 == 0) CheckHostMemory("parsing the JSON program");
    return true;
  }
  size_t values_ = 0;
};

}  // namespace

std::vector<int64_t> PirReader::OperandIds(const json& op) const {
  std::vector<int64_t> ids;
  if (!op.contains("I")) return ids;
  for (const json& i : op.at("I")) ids.push_back(ToInt64(Field(i, "%")));
  return ids;
}

std::vector<std::pair<int64_t, const json*>> PirReader::Results(const json& op) const {
  std::vector<std::pair<int64_t, const json*>> out;
  if (!op.contains("O")) return out;
  const json& o = op.at("O");
  // Parameter ops write one result object instead of a list.
  auto one = [&](const json& r) {
    out.emplace_back(ToInt64(Field(r, "%")), r.contains("TT") ? &r.at("TT") : nullptr);
  };
  if (o.is_object()) {
    one(o);
  } else {
    for (const json& r : o) one(r);
  }
  return out;
}

std::vector<std::string> PirReader::Args(int64_t id) {
  if (id == 0) return {};  // an absent optional operand
  Value& v = Get(id);
  if (!v.is_vec) return {v.name};
  std::vector<std::string> names;
  for (int64_t part : v.parts) names.push_back(Get(part).name);
  return names;
}

// Pass 1: names, vectors, constants and fetches, before any op is emitted
// (a fetch renames a value defined earlier).
void PirReader::Scan(const json& op) {
  if (op.contains("regions") && !op.at("regions").empty()) {
    Fail(ErrorKind::kUnimplemented,
         "{}: op {} ({}) has nested regions; PIR control flow (if/while) is not supported", path_,
         op_index_, op_name_);
  }
  const ir::AttrMap attrs = op_name_ == "p" ? ir::AttrMap() : Attrs(op);
  auto results = Results(op);
  for (const auto& [id, type] : results) {
    if (id <= 0) Corrupt(fmt::format("result id {} (block arguments are not supported)", id));
    if (values_.count(id)) Corrupt(fmt::format("value %{} defined twice", id));
    Value v;
    v.name = fmt::format("%{}", id);
    v.type = type;
    v.producer = op_name_;
    v.is_vec = type && type->is_object() && type->value("#", "") == "0.t_vec";
    values_[id] = std::move(v);
  }
  auto operands = OperandIds(op);
  if (op_name_ == "p") {
    const json& a = Field(op, "A");
    if (!a.is_array() || a.size() < 4 || !a[3].is_string() || results.size() != 1) {
      Corrupt("parameter op without parameter_name");
    }
    values_[results[0].first].name = a[3].get<std::string>();
  } else if (op_name_ == "1.data" || op_name_ == "1.feed") {
    // (feed: a program translated from the legacy form, its inputs by col.)
    if (results.size() != 1) Corrupt(fmt::format("{} op must have one result", op_name_));
    values_[results[0].first].name = attrs.Str("name", values_[results[0].first].name);
  } else if (op_name_.size() > 3 && op_name_.rfind("1.", 0) == 0 && op_name_.back() == '_') {
    // In-place op (adam_, batch_norm_, scale_): result <X>Out overwrites
    // operand <X>, so it takes that variable's name, as the legacy form
    // writes it.
    const PirOpCompat* compat = FindPirOpCompat(op_name_.substr(2));
    for (size_t i = 0; compat && i < results.size() && i < compat->outputs.size(); ++i) {
      const std::string& out = compat->outputs[i];
      if (out.size() < 3 || out.compare(out.size() - 3, 3, "Out") != 0) continue;
      // Out overwrites X (scale_, relu_); <X>Out overwrites <X> (adam_'s ParamOut).
      std::string in = out == "Out" ? "X" : out.substr(0, out.size() - 3);
      for (size_t j = 0; j < operands.size() && j < compat->operands.size(); ++j) {
        if (compat->operands[j].kind == OperandKind::kTensor && compat->operands[j].slot == in &&
            operands[j] != 0) {
          values_[results[i].first].name = Get(operands[j]).name;
          values_[results[i].first].rebinds = true;
        }
      }
    }
  } else if (op_name_ == "0.combine") {
    if (results.size() != 1) Corrupt("combine must have one result");
    for (int64_t id : operands) Get(id);  // defined before use
    values_[results[0].first].parts = operands;
  } else if (op_name_ == "0.split" || op_name_ == "0.slice") {
    if (operands.size() != 1) Corrupt("expects one vector operand");
    Value& vec = Get(operands[0]);
    if (!vec.is_vec) Corrupt("operand is not a vector");
    size_t n = vec.type && vec.type->contains("D") ? vec.type->at("D").size() : results.size();
    if (vec.parts.size() < n) vec.parts.resize(n, 0);
    if (op_name_ == "0.split") {
      if (results.size() != n) Corrupt("split result count differs from the vector size");
      for (size_t i = 0; i < n; ++i) vec.parts[i] = results[i].first;
    } else {
      int64_t index = attrs.Int("index", -1);
      if (index < 0 || static_cast<size_t>(index) >= n || results.size() != 1) {
        Corrupt(fmt::format("slice index {} out of range for a vector of {}", index, n));
      }
      vec.parts[index] = results[0].first;
    }
  } else if (op_name_ == "1.full" && results.size() == 1) {
    Value& v = values_[results[0].first];
    std::vector<int64_t> shape = attrs.Ints("shape");
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    DType dt;
    if (n == 1 && DTypeFromVarType(attrs.Int("dtype", 5), &dt)) {
      v.is_scalar = true;
      v.scalar = attrs.Float("value", 0);
      v.scalar_is_int = IsInteger(dt) || dt == DType::kBool;
    }
  } else if (op_name_ == "1.full_int_array" && results.size() == 1) {
    Value& v = values_[results[0].first];
    v.is_int_array = true;
    v.ints = attrs.Ints("value");
  } else if (op_name_ == "1.fetch") {
    if (operands.size() != 1) Corrupt("fetch must have one operand");
    Get(operands[0]);
    fetches_.push_back({attrs.Int("col", -1), attrs.Str("name", ""), operands[0]});
  }
}

void PirReader::AddVar(Program& prog, const VarInfo& v) {
  if (!prog.vars.emplace(v.name, v).second) {
    Corrupt(fmt::format("two values are both named '{}'", v.name));
  }
}

Program PirReader::Read(const json& root) {
  const json& base = Field(root, "base_code");
  if (base.value("magic", "") != "pir") Corrupt("base_code.magic is not \"pir\"");
  const json& regions = Field(Field(root, "program"), "regions");
  if (!regions.is_array() || regions.empty()) Corrupt("program has no region");
  const json& blocks = Field(regions[0], "blocks");
  if (!blocks.is_array() || blocks.empty()) Corrupt("program has no block");
  const json& ops = Field(blocks[0], "ops");
  if (!ops.is_array()) Corrupt("block ops is not a list");

  for (size_t i = 0; i < ops.size(); ++i) {
    op_index_ = static_cast<int>(i);
    op_name_ = Field(ops[i], "#").get<std::string>();
    Scan(ops[i]);
  }
  op_index_ = -1;
  // Vector results nobody unpacks still need element names for their slot.
  for (auto& [id, v] : values_) {
    if (!v.is_vec || v.producer == "0.combine") continue;
    size_t n = v.type && v.type->contains("D") ? v.type->at("D").size() : 0;
    v.parts.resize(std::max(n, v.parts.size()), 0);
    for (size_t i = 0; i < v.parts.size(); ++i) {
      if (v.parts[i] != 0) continue;
      Value part;
      part.name = fmt::format("%{}.{}", id, i);
      part.type = &v.type->at("D")[i];
      part.producer = v.producer;
      v.parts[i] = next_synthetic_;
      values_[next_synthetic_++] = std::move(part);
    }
  }
  // Name a fetched value after its fetch when that is unambiguous.
  std::map<int64_t, int> fetch_count;
  std::set<std::string> names;
  for (const auto& [id, v] : values_) names.insert(v.name);
  for (const Fetch& f : fetches_) fetch_count[f.value]++;
  std::set<int64_t> renamed;
  for (const Fetch& f : fetches_) {
    Value& v = values_[f.value];
    // An in-place result keeps its variable's name (the state it updates).
    bool plain = v.producer != "p" && v.producer != "1.data" && !v.is_vec && !v.rebinds;
    if (plain && fetch_count[f.value] == 1 && !f.name.empty() && !names.count(f.name)) {
      names.insert(f.name);
      v.name = f.name;
      renamed.insert(f.value);
    }
  }

  Program prog;
  prog.path = path_;
  prog.format = "pir";
  for (size_t i = 0; i < ops.size(); ++i) {
    op_index_ = static_cast<int>(i);
    op_name_ = ops[i].at("#").get<std::string>();
    if (i % 4096 == 0 && i) CheckHostMemory(fmt::format("reading op {} of {}", i, ops.size()));
    Emit(ops[i], static_cast<int>(i), prog);
  }
  op_index_ = -1;
  // Inputs of feed ops by col, after any data ops'.
  std::stable_sort(feed_cols_.begin(), feed_cols_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [col, name] : feed_cols_) prog.feed_names.push_back(name);

  // Outputs by col; a fetch whose value kept its own name reads it through
  // an assign to the fetch name, so fetch_names are always variables.
  std::stable_sort(fetches_.begin(), fetches_.end(),
                   [](const Fetch& a, const Fetch& b) { return a.col < b.col; });
  for (size_t i = 0; i < fetches_.size(); ++i) {
    const Fetch& f = fetches_[i];
    if (f.col != static_cast<int64_t>(i) || f.name.empty()) {
      Corrupt(fmt::format("fetch ops do not cover columns 0..{} exactly (col {}, name '{}')",
                          fetches_.size() - 1, f.col, f.name));
    }
    prog.fetch_names.push_back(f.name);
    if (renamed.count(f.value)) continue;
    const Value& v = values_[f.value];
    // A fetch named like the value it reads (Paddle does this when an output
    // is an input passed through, e.g. dropout with p = 0) needs no assign.
    if (v.name == f.name) continue;
    OpDesc op;
    op.type = "assign";
    op.index = static_cast<int>(ops.size() + i);
    op.inputs.push_back({"X", {v.name}});
    op.outputs.push_back({"Out", {f.name}});
    VarInfo var = VarFromType(f.name, v.type);
    AddVar(prog, var);
    prog.ops.push_back(std::move(op));
  }

  // Constants folded into every consumer's attributes are dropped.
  std::set<std::string> used(prog.fetch_names.begin(), prog.fetch_names.end());
  for (const OpDesc& op : prog.ops) {
    for (const auto& [slot, args] : op.inputs) used.insert(args.begin(), args.end());
  }
  std::vector<OpDesc> kept;
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    OpDesc& op = prog.ops[i];
    // (A mutated constant op may have lost its result: nothing reads it.)
    const std::vector<std::string>& out = op.Outputs("Out");
    if (folded_constant_ops_.count(static_cast<int>(i)) && (out.empty() || !used.count(out[0]))) {
      if (!out.empty()) prog.vars.erase(out[0]);
      continue;
    }
    kept.push_back(std::move(op));
  }
  prog.ops = std::move(kept);
  std::sort(prog.param_names.begin(), prog.param_names.end());
  return prog;
}

void PirReader::Emit(const json& op, int index, Program& prog) {
  auto results = Results(op);
  auto add_result_vars = [&]() {
    for (const auto& [id, type] : results) {
      const Value& v = values_.at(id);
      if (v.rebinds) continue;  // the variable exists already
      if (!v.is_vec) {
        AddVar(prog, VarFromType(v.name, v.type));
        continue;
      }
      for (int64_t part : v.parts) {
        const Value& p = Get(part);
        if (!prog.vars.count(p.name)) AddVar(prog, VarFromType(p.name, p.type));
      }
    }
  };
  if (op_name_ == "p") {
    VarInfo var = VarFromType(values_.at(results[0].first).name, results[0].second);
    // OA = [persistable, stop_gradient, trainable]; absent when the program
    // was saved without training attributes, where every parameter persists.
    const json* oa = op.contains("OA") ? &op.at("OA") : nullptr;
    var.persistable =
        !(oa && oa->is_array() && !oa->empty() && (*oa)[0].is_number() && (*oa)[0] == 0);
    var.is_parameter = true;
    if (var.persistable) prog.param_names.push_back(var.name);
    AddVar(prog, var);
    return;
  }
  if (op_name_ == "1.feed") {
    add_result_vars();
    feed_cols_.emplace_back(Attrs(op).Int("col", 0), values_.at(results[0].first).name);
    return;
  }
  if (op_name_ == "1.data") {
    // A persistable data op is training state (optimizer moments, running
    // statistics), not a feed.
    const json* oa = op.contains("OA") ? &op.at("OA") : nullptr;
    bool persistable = false;
    if (oa && oa->is_array()) {
      for (const json& a : *oa) {
        if (a.is_object() && a.value("N", "") == "persistable" && a.contains("AT")) {
          const json& at = a.at("AT");
          // at() on an AT that is no object throws as value() did.
          const json& d = at.is_object() && !at.contains("D") ? kNoValue : at.at("D");
          persistable =
              d.is_array() && !d.empty() && d[0].is_object() && d[0].value("D", false) == true;
        }
      }
    }
    if (persistable) {
      VarInfo var = VarFromType(values_.at(results[0].first).name, results[0].second);
      var.persistable = true;
      prog.param_names.push_back(var.name);
      AddVar(prog, var);
      return;
    }
    add_result_vars();
    prog.feed_names.push_back(values_.at(results[0].first).name);
    return;
  }
  if (op_name_ == "0.combine" || op_name_ == "0.split" || op_name_ == "0.slice" ||
      op_name_ == "1.fetch") {
    return;
  }

  OpDesc out;
  out.index = index;
  ir::AttrMap attrs = Attrs(op);
  std::vector<int64_t> operands = OperandIds(op);
  size_t dot = op_name_.find('.');
  std::string dialect = dot == std::string::npos ? "" : op_name_.substr(0, dot);
  std::string short_name = dot == std::string::npos ? op_name_ : op_name_.substr(dot + 1);
  static const std::map<std::string, std::string> kDialects = {
      {"0", "builtin"}, {"1", "pd_op"}, {"2", "cf"}, {"3", "custom_op"}, {"4", "dist"}};
  const PirOpCompat* compat = dialect == "1" ? FindPirOpCompat(short_name) : nullptr;
  bool foldable = false;

  if (op_name_ == "1.full") {
    out.type = "fill_constant";
    foldable = true;
  } else if (op_name_ == "1.full_int_array") {
    // Legacy programs hold int lists as assign_value constants.
    out.type = "assign_value";
    std::vector<int64_t> values = attrs.Ints("value");
    ir::AttrMap a;
    a.Set("shape", std::vector<int64_t>{static_cast<int64_t>(values.size())});
    a.Set("dtype", attrs.Int("dtype", 3));
    a.Set("values", std::move(values));
    attrs = std::move(a);
    foldable = true;
  } else if (compat) {
    out.type = compat->legacy_type;
  } else if (dialect == "1") {
    out.type = short_name;  // unknown pd_op: translation reports it
  } else {
    auto it = kDialects.find(dialect);
    out.type = it == kDialects.end() ? op_name_ : it->second + "." + short_name;
  }

  for (size_t i = 0; i < operands.size(); ++i) {
    int64_t id = operands[i];
    if (id == 0) continue;  // absent optional operand
    OperandSpec spec;
    spec.slot = fmt::format("in{}", i);
    if (compat && i < compat->operands.size()) spec = compat->operands[i];
    if (spec.kind == OperandKind::kDrop) continue;
    Value& v = Get(id);
    if (spec.kind == OperandKind::kIntArray) {
      if (v.is_int_array) {
        attrs.Set(spec.attr, v.ints);
        continue;
      }
      if (v.is_scalar && v.scalar_is_int) {
        attrs.Set(spec.attr, std::vector<int64_t>{static_cast<int64_t>(v.scalar)});
        continue;
      }
      out.inputs.push_back({v.is_vec ? spec.list_slot : spec.slot, Args(id)});
    } else if (spec.kind == OperandKind::kScalar && v.is_scalar) {
      if (v.scalar_is_int)
        attrs.Set(spec.attr, static_cast<int64_t>(v.scalar));
      else
        attrs.Set(spec.attr, v.scalar);
    } else {
      out.inputs.push_back({spec.slot, Args(id)});
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    std::string slot = fmt::format("out{}", i);
    if (compat && i < compat->outputs.size())
      slot = compat->outputs[i];
    else if (out.type == "fill_constant" || out.type == "assign_value")
      slot = "Out";
    out.outputs.push_back({slot, Args(results[i].first)});
  }

  // Attribute spelling: renames, then legacy-only attributes.
  ir::AttrMap renamed;
  for (const auto& [name, value] : attrs.all()) {
    std::string to = name;
    if (compat) {
      for (const auto& [from, legacy] : compat->attr_renames) {
        if (from == name) to = legacy;
      }
    }
    renamed.Set(to, value);
  }
  if (compat) {
    for (const auto& [name, value] : compat->fixed_attrs.all()) {
      if (!renamed.Has(name)) renamed.Set(name, value);
    }
  }
  out.attrs = std::move(renamed);

  if (out.type.rfind("reduce_", 0) == 0) {
    bool dim_tensor = out.HasInput("DimTensor") || out.HasInput("DimTensorList");
    if (!out.attrs.Has("dim")) out.attrs.Set("dim", std::vector<int64_t>{});
    bool all = !dim_tensor && out.attrs.Ints("dim").empty();
    out.attrs.Set("reduce_all", all || out.attrs.Bool("reduce_all", false));
  } else if (out.type == "cast" && out.HasInput("X")) {
    const VarInfo* in = prog.FindVar(out.Inputs("X")[0]);
    if (in && in->is_dense_tensor) out.attrs.Set("in_dtype", VarTypeFromDType(in->dtype));
  } else if (out.type == "assign_value") {
    // Integer constants stay exact, as legacy SCALARS of ints read.
    DType dt;
    const ir::Attribute* values = out.attrs.Find("values");
    if (values && std::holds_alternative<std::vector<double>>(*values) &&
        DTypeFromVarType(out.attrs.Int("dtype", 5), &dt) && !IsFloat(dt)) {
      std::vector<int64_t> ints;
      for (double d : std::get<std::vector<double>>(*values)) ints.push_back(std::llround(d));
      out.attrs.Set("values", std::move(ints));
    }
  }

  add_result_vars();
  if (foldable) folded_constant_ops_.insert(static_cast<int>(prog.ops.size()));
  prog.ops.push_back(std::move(out));
}

}  // namespace pir

using pir::BudgetedDomParser;
using pir::json;
using pir::PirReader;

Program ReadPirProgram(const std::string& path) {
  std::string text = ReadFileBytes(path, "Paddle PIR program");
  json root;
  try {
    // The document takes ~10x the text (a map per object): its growth is
    // checked against the memory cap as it is built.
    BudgetedDomParser builder(root);
    json::sax_parse(text, &builder);
  } catch (const json::exception& e) {
    Fail(ErrorKind::kDataLoss, "{}: not a valid PIR program (JSON parse failed: {})", path,
         e.what());
  }
  PirReader reader(path);
  try {
    return reader.Read(root);
  } catch (const json::exception& e) {
    // A field of the wrong JSON type somewhere in an op.
    Fail(ErrorKind::kDataLoss, "{}: malformed PIR program{}: {}", path, reader.Where(), e.what());
  }
}

}  // namespace tiller::paddle
