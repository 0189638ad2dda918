// include/tiller/ipu_options.h: Paddle's IpuStrategy option set, set and
// read by name, each value checked against the option's entry in the
// registry's table (ipu_option_specs.cc: its default and what Tiller does
// with it).
#include "tiller/ipu_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "runtime/ipu_option_specs.h"
#include "tiller/option_groups.h"

namespace tiller::training {
namespace {

using Support = OptionSupport;

void RequireOneOf(const std::string& name, const OptionValue& value, const OptionValue& converted,
                  std::initializer_list<const char*> choices);

const char* TypeWord(const OptionValue& v) {
  switch (v.index()) {
    case 0:
      return "a bool";
    case 1:
      return "an integer";
    case 2:
      return "a number";
    case 3:
      return "a string";
    case 4:
      return "a list of strings";
    default:
      return "a dict of strings";
  }
}

// A location_* setting as Paddle's dict spells it: an unsigned integer
// (Paddle casts each value to uint64; > 0 is on).
std::optional<int64_t> ParseLocationValue(const std::string& s) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end || v < 0) return std::nullopt;
  return v;
}

// The keys of a location_* dict: Paddle's IpuStrategy::SetTensorLocation's,
// each with an unsigned integer.
void CheckLocation(const std::string& name, const OptionMap& settings) {
  static constexpr std::array<std::string_view, 9> kKeys = {
      "on_chip",
      "use_replicated_tensor_sharding",
      "min_elements_for_off_chip",
      "min_elements_for_replicated_tensor_sharding",
      "use_io_tiles_to_load",
      "use_io_tiles_to_store",
      "sharding_domain_with_all",
      "sharding_domain_with_consecutive",
      "sharding_domain_with_orthogonal"};
  for (const auto& [key, value] : settings) {
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      Fail(ErrorKind::kInvalidArgument, "option '{}' has no setting '{}' (Paddle's: {})", name, key,
           fmt::join(kKeys, ", "));
    if (!ParseLocationValue(value))
      Fail(ErrorKind::kInvalidArgument, "option '{}' takes integers >= 0, got {} for '{}'", name,
           OptionValueRepr(value), key);
  }
}

// The container `old` with `add` added as Paddle's container setters do:
// map keys merged in, list items appended; PopART keeps dot checks and
// instrumentations in sets.
OptionValue AddTo(const std::string& name, const OptionValue& old, const OptionValue& add) {
  if (const OptionMap* settings = std::get_if<OptionMap>(&add)) {
    if (name.starts_with("location_")) CheckLocation(name, *settings);
    OptionMap out = std::get<OptionMap>(old);
    for (const auto& [key, value] : *settings) out[key] = value;
    return out;
  }
  OptionList out = std::get<OptionList>(old);
  for (const std::string& item : std::get<OptionList>(add)) {
    if (name == "dot_checks")  // Paddle's valid_dot
      RequireOneOf(name, item, item, {"Fwd0", "Fwd1", "Bwd0", "PreAlias", "Final"});
    if (name == "hardware_instrumentations" && item != "0" && item != "1")
      Fail(ErrorKind::kInvalidArgument,
           "option 'hardware_instrumentations' takes 0 (outer) or 1 (inner), got {}",
           OptionValueRepr(item));
    out.push_back(item);
  }
  if (name == "dot_checks" || name == "hardware_instrumentations") {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

// `value` as the type of `like`, where nothing is lost (see OptionValue).
std::optional<OptionValue> Convert(const OptionValue& value, const OptionValue& like) {
  if (value.index() == like.index()) return value;
  if (std::holds_alternative<bool>(like)) {
    if (const int64_t* i = std::get_if<int64_t>(&value); i && (*i == 0 || *i == 1))
      return OptionValue(*i == 1);
  } else if (std::holds_alternative<int64_t>(like)) {
    const double* d = std::get_if<double>(&value);
    if (d && std::isfinite(*d) && std::trunc(*d) == *d && std::abs(*d) < 9.0e15)
      return OptionValue(static_cast<int64_t>(*d));
  } else if (std::holds_alternative<double>(like)) {
    if (const int64_t* i = std::get_if<int64_t>(&value))
      return OptionValue(static_cast<double>(*i));
  }
  return std::nullopt;
}

// A string option's value is one of `choices`; else "option 'NAME' takes
// 'a', 'b' or 'c', got VALUE".
void RequireOneOf(const std::string& name, const OptionValue& value, const OptionValue& converted,
                  std::initializer_list<const char*> choices) {
  const std::string& v = std::get<std::string>(converted);
  std::string list;
  size_t i = 0;
  for (const char* c : choices) {
    if (v == c) return;
    list += fmt::format("{}'{}'", i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ", c);
    ++i;
  }
  Fail(ErrorKind::kInvalidArgument, "option '{}' takes {}, got {}", name, list,
       OptionValueRepr(value));
}

const OptionSpec& Require(const std::string& name) {
  const OptionSpec* spec = IpuOptions::FindSpec(name);
  if (!spec) Fail(ErrorKind::kNotFound, "unknown option '{}'", name);
  return *spec;
}

}  // namespace

std::string OptionValueRepr(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "True" : "False";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return fmt::format("{}", *i);
  if (const double* d = std::get_if<double>(&value)) {
    // Shortest round-trip digits, as Python's float repr; Python always
    // shows a float as one ("1.0").
    std::string s = fmt::format("{}", *d);
    if (s.find_first_of(".eninf") == std::string::npos) s += ".0";
    return s;
  }
  if (const OptionList* list = std::get_if<OptionList>(&value)) {
    std::string out = "[";
    for (const std::string& item : *list)
      out += (out.size() > 1 ? ", " : "") + OptionValueRepr(item);
    return out + "]";
  }
  if (const OptionMap* map = std::get_if<OptionMap>(&value)) {
    std::string out = "{";
    for (const auto& [key, item] : *map)
      out += (out.size() > 1 ? ", " : "") + OptionValueRepr(key) + ": " + OptionValueRepr(item);
    return out + "}";
  }
  // Python quotes with ' unless the text holds ' and no ".
  const std::string& s = std::get<std::string>(value);
  const char quote =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out += '\\';
    out += c;
  }
  return out + quote;
}

const char* OptionTypeName(const OptionValue& value) {
  static constexpr const char* kNames[] = {"bool", "uint64", "double", "string", "vector", "map"};
  static_assert(std::size(kNames) == std::variant_size_v<OptionValue>);
  return kNames[value.index()];
}

const OptionSpec* IpuOptions::FindSpec(const std::string& name) {
  const auto& specs = Specs();
  auto it = std::lower_bound(specs.begin(), specs.end(), name,
                             [](const OptionSpec& s, const std::string& n) { return s.name < n; });
  return it != specs.end() && it->name == name ? &*it : nullptr;
}

IpuOptions::IpuOptions() {
  for (const OptionSpec& spec : Specs()) {
    if (spec.default_value) values_[spec.name] = *spec.default_value;
  }
}

std::string IpuOptions::Set(const std::string& name, const OptionValue& value) {
  const OptionSpec* spec = FindSpec(name);
  if (!spec) {
    std::string valid;
    for (const OptionSpec& s : Specs()) valid += (valid.empty() ? "" : ", ") + s.name;
    Fail(ErrorKind::kInvalidArgument, "unknown option '{}'; valid options: {}", name, valid);
  }
  // Every option has Paddle's type (its default's).
  std::optional<OptionValue> converted = Convert(value, *spec->default_value);
  if (!converted)
    Fail(ErrorKind::kInvalidArgument, "option '{}' takes {}, got {}", name,
         TypeWord(*spec->default_value), OptionValueRepr(value));
  if (spec->support == Support::kNoEffect) {
    std::string no_effect =
        fmt::format("option '{}' tunes the IPU toolchain and has no effect on Tiller", name);
    if (name == "custom_ops")
      Fail(ErrorKind::kInvalidArgument,
           "option 'custom_ops' is read-only (as in Paddle): add_custom_op adds to it");
    if (name == "location_optimizer") {
      // Each key sets its location_optimizer.<key> option (some honoured),
      // all or none; Paddle's keys without one are kept in the dict.
      const OptionMap& settings = std::get<OptionMap>(*converted);
      CheckLocation(name, settings);
      IpuOptions next = *this;
      OptionMap& kept = std::get<OptionMap>(next.values_[name]);
      std::string notes;
      for (const auto& [key, word] : settings) {
        const OptionSpec* sub = FindSpec(fmt::format("{}.{}", name, key));
        std::string note = no_effect;
        if (!sub) {
          kept[key] = word;
        } else {
          const int64_t v = *ParseLocationValue(word);
          note = std::holds_alternative<bool>(*sub->default_value) ? next.Set(sub->name, v > 0)
                                                                   : next.Set(sub->name, v);
        }
        if (!note.empty() && notes.find(note) == std::string::npos)
          notes += (notes.empty() ? "" : "; ") + note;
      }
      next.set_.insert(name);
      *this = std::move(next);
      return notes;
    }
    values_[name] =
        converted->index() >= 4 ? AddTo(name, values_.at(name), *converted) : *converted;
    set_.insert(name);
    return no_effect;
  }
  if (spec->support == Support::kNotYet && *converted != *spec->default_value)
    Fail(ErrorKind::kInvalidArgument,
         "option {}={} is not implemented by Tiller yet (supported: {})", name,
         OptionValueRepr(value), OptionValueRepr(*spec->default_value));
  if ((name == "batches_per_step" || name == "accumulation_factor" || name == "micro_batch_size" ||
       name == "replicated_graph_count" || name == "num_ipus") &&
      std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option '{}' must be >= 1, got {}", name,
         OptionValueRepr(value));
  if (name == "accumulation_and_replication_reduction_type") {
    // popart::ReductionType; PopART only asks whether it is Mean, so
    // NoReduction (2) sums as Sum does (Paddle took 0 to 2).
    const int64_t r = std::get<int64_t>(*converted);
    if (r < 0 || r > 2)
      Fail(ErrorKind::kInvalidArgument,
           "option accumulation_and_replication_reduction_type takes 0 (sum), 1 (mean) or 2 (no "
           "reduction: summed, as PopART did), got {}",
           OptionValueRepr(value));
  }
  if (name == "auto_recomputation") {
    const int64_t r = std::get<int64_t>(*converted);
    if (r == 2)
      Fail(ErrorKind::kInvalidArgument,
           "option auto_recomputation=2 (norm only) is not implemented by Tiller (supported: 0 "
           "none, 1 standard, 3 pipeline, 4 all; 3 and 4 recompute from stage inputs alone)");
    if (r < 0 || r > 4)
      Fail(ErrorKind::kInvalidArgument, "option auto_recomputation takes 0 to 4, got {}",
           OptionValueRepr(value));
  }
  if (name == "loss_scaling") {
    const double v = std::get<double>(*converted);
    if (!(v > 0) || !std::isfinite(v))
      Fail(ErrorKind::kInvalidArgument, "option 'loss_scaling' must be a finite number > 0, got {}",
           OptionValueRepr(value));
  }
  if (name == "half_dtype") RequireOneOf(name, value, *converted, {"auto", "bfloat16", "float16"});
  if (name == "accl1_type" || name == "accl2_type" || name == "accl3_type")
    RequireOneOf(name, value, *converted, {"FLOAT", "FLOAT16"});
  if (name == "pipeline_schedule") RequireOneOf(name, value, *converted, {"1f1b", "fill_drain"});
  if (name == "auto_split_cost") RequireOneOf(name, value, *converted, {"estimated", "measured"});
  if (name == "anchor_return_type")
    RequireOneOf(name, value, *converted, {"all", "final", "every_n", "sum"});
  if (name == "anchor_return_period" && std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'anchor_return_period' must be >= 1, got {}",
         OptionValueRepr(value));
  if (name == "pipeline_in_flight" && std::get<int64_t>(*converted) < 0)
    Fail(ErrorKind::kInvalidArgument,
         "option 'pipeline_in_flight' must be >= 0 (0: the stages + 1), got {}",
         OptionValueRepr(value));
  // Options of a group (tiller/option_groups.h) are checked by the group.
  if (name == "all_reduce_bucket_bytes") {
    CollectiveSettings c;
    c.all_reduce_bucket_bytes = std::get<int64_t>(*converted);
    c.Validate();
  }
  if (name == "processes_per_replica" && std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'processes_per_replica' must be >= 1, got {}",
         OptionValueRepr(value));
  if (name == "stages_per_device") {
    StageSplitSettings split;
    split.stages_per_device =
        static_cast<int>(std::clamp<int64_t>(std::get<int64_t>(*converted), INT32_MIN, INT32_MAX));
    split.Validate();
  }
  if (name == "max_weight_norm") {
    const double v = std::get<double>(*converted);
    if (!(v >= 0) || !std::isfinite(v))
      Fail(ErrorKind::kInvalidArgument,
           "option 'max_weight_norm' must be a finite number >= 0 (0: no clamp), got {}",
           OptionValueRepr(value));
  }
  if (name == "synthetic_data_mode") {
    const int64_t m = std::get<int64_t>(*converted);
    if (m < 0 || m > 2)
      Fail(ErrorKind::kInvalidArgument,
           "option synthetic_data_mode takes 0 (off), 1 (zeros) or 2 (random normal), got {}",
           OptionValueRepr(value));
  }
  if (name == "compilation_progress_total" && std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'compilation_progress_total' must be >= 1, got {}",
         OptionValueRepr(value));
  if (name == "num_threads" && std::get<int64_t>(*converted) < 0)
    Fail(ErrorKind::kInvalidArgument,
         "option 'num_threads' must be >= 0 (0: every hardware thread), got {}",
         OptionValueRepr(value));
  values_[name] = *converted;
  set_.insert(name);
  return "";
}

void IpuOptions::SetGraphConfig(int64_t num_ipus, bool is_training, int64_t micro_batch_size,
                                bool enable_manual_shard) {
  if (enable_manual_shard && num_ipus <= 1)
    Fail(ErrorKind::kInvalidArgument, "set_graph_config: enable_manual_shard needs num_ipus > 1");
  // All or nothing: set on a copy, kept when every option took.
  IpuOptions next = *this;
  next.Set("num_ipus", num_ipus);
  next.Set("is_training", is_training);
  next.Set("micro_batch_size", micro_batch_size);
  next.Set("enable_manual_shard", enable_manual_shard);
  *this = std::move(next);
}

void IpuOptions::SetPipeliningConfig(bool enable_pipelining, int64_t batches_per_step,
                                     bool enable_gradient_accumulation,
                                     int64_t accumulation_factor) {
  if (enable_pipelining && !GetBool("enable_manual_shard"))
    Fail(ErrorKind::kInvalidArgument,
         "set_pipelining_config: pipelining needs enable_manual_shard "
         "(set_graph_config(enable_manual_shard=True))");
  IpuOptions next = *this;
  next.Set("enable_pipelining", enable_pipelining);
  next.Set("batches_per_step", batches_per_step);
  next.Set("enable_gradient_accumulation", enable_gradient_accumulation);
  next.Set("accumulation_factor", accumulation_factor);
  *this = std::move(next);
}

void IpuOptions::SetPrecisionConfig(bool enable_fp16) {
  Set("enable_fp16", enable_fp16);
}

void IpuOptions::AddCustomOp(const std::string& paddle_op, const std::string& popart_op,
                             const std::string& domain, int64_t version) {
  // IpuCustomOpIdentifier::repr() (paddle/fluid/platform/device/ipu/ipu_utils.h).
  std::get<OptionList>(values_.at("custom_ops"))
      .push_back(fmt::format("paddle_op: {}, domain: {}, type: {}, version: {}", paddle_op, domain,
                             popart_op, version));
  set_.insert("custom_ops");
}

OptionValue IpuOptions::Get(const std::string& name) const {
  Require(name);
  const OptionValue& value = values_.at(name);
  if (name == "location_optimizer")  // its keys are options of their own
    return runtime::WithLocationKeys(Specs(), name, std::get<OptionMap>(value),
                                     [this](const OptionSpec& s) { return values_.at(s.name); });
  return value;
}

bool IpuOptions::GetBool(const std::string& name) const {
  OptionValue v = Get(name);
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  Fail(ErrorKind::kInvalidArgument, "option '{}' is {}, not a bool", name, OptionValueRepr(v));
}

int64_t IpuOptions::GetInt(const std::string& name) const {
  OptionValue v = Get(name);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  Fail(ErrorKind::kInvalidArgument, "option '{}' is {}, not an integer", name, OptionValueRepr(v));
}

double IpuOptions::GetDouble(const std::string& name) const {
  OptionValue v = Get(name);
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  Fail(ErrorKind::kInvalidArgument, "option '{}' is {}, not a number", name, OptionValueRepr(v));
}

std::string IpuOptions::GetStr(const std::string& name) const {
  OptionValue v = Get(name);
  if (const std::string* str = std::get_if<std::string>(&v)) return *str;
  Fail(ErrorKind::kInvalidArgument, "option '{}' is {}, not a string", name, OptionValueRepr(v));
}

bool IpuOptions::IsSet(const std::string& name) const {
  Require(name);
  return set_.count(name) > 0;
}

bool IpuOptions::EvalOnly() const {
  return GetBool("runtime_options.enable_eval") || !GetBool("is_training");
}

int IpuOptions::NumThreads() const {
  int64_t n = GetInt("num_threads");
  if (n > 0) return static_cast<int>(std::min<int64_t>(n, 1 << 16));
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

}  // namespace tiller::training
