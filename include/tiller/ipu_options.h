// Training options by the names of Paddle's IPU strategy
// (paddle.static.IpuStrategy), so a training configuration moves from a
// Paddle IPU script to Tiller unchanged, from Python (tiller.IpuStrategy)
// or from C++:
//
//   tiller::training::IpuOptions options;
//   options.SetGraphConfig(/*num_ipus=*/1, /*is_training=*/true, /*micro_batch_size=*/8);
//   options.Set("random_seed", int64_t{42});
//   options.Set("enable_floating_point_checks", true);
//   std::string note = options.Set("available_memory_proportion", 0.5);  // accepted, no effect
//   tiller::training::TrainingSession session("train.json", feeds, fetches, options);
//
// Every option Paddle's strategy has that Tiller knows is one of three kinds:
//  - honoured: Tiller does what it says (is_training, micro_batch_size,
//    random_seed, runtime_options.enable_eval, use_no_bias_optimizer,
//    enable_floating_point_checks, enable_gradient_accumulation,
//    accumulation_factor, batches_per_step,
//    accumulation_and_replication_reduction_type, enable_replicated_graphs,
//    replicated_graph_count, num_ipus, enable_manual_shard, enable_pipelining,
//    auto_recomputation, and Tiller's own num_threads, pipeline_schedule and
//    trace_path);
//  - not yet implemented: it would change what is trained (fp16, loss
//    scaling), so only its default is
//    accepted until Tiller implements it; any other value is refused rather
//    than ignored;
//  - no effect: it tunes the IPU toolchain (memory proportions, engine
//    options, tensor locations, ...); accepted and stored with the type
//    Paddle's registry gives it (maps and lists included), with a note.
// Any other name is refused, listing the valid ones.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tiller/error.h"

namespace tiller::training {

// Paddle's container options hold strings, as its registry stores them
// (ipu_strategy.cc): a "vector" (custom_codelets, dot_checks, ...) and a
// "map" (engine_options, the location_* settings, ...).
using OptionList = std::vector<std::string>;
using OptionMap = std::map<std::string, std::string>;

// A value of an option. Set() converts between the numeric alternatives
// where nothing is lost: an integer 0 or 1 for a bool option, an integral
// double for an integer option, an integer for a double option.
using OptionValue = std::variant<bool, int64_t, double, std::string, OptionList, OptionMap>;

// The value as Python's repr() writes it: True, 8, 1.0, 'text', ['a'],
// {'k': 'v'}. Messages use it, so they read like the Python API's.
std::string OptionValueRepr(const OptionValue& value);

// The type as Paddle's core.IpuStrategy.get_option names it ('type'): bool,
// uint64, double, string, vector or map.
const char* OptionTypeName(const OptionValue& value);

enum class OptionSupport {
  kHonoured,  // Tiller does what the option says
  kNotYet,    // changes results and is not implemented: only the default is accepted
  kNoEffect,  // tunes the IPU toolchain: accepted, has no effect on Tiller
};

struct OptionSpec {
  std::string name;
  OptionSupport support = OptionSupport::kHonoured;
  // Paddle's default (PopART's for its session options), which also fixes
  // the option's type. Every option has one.
  std::optional<OptionValue> default_value;
  std::string description;
  // Tiller's own option, not one of Paddle's registry (num_threads,
  // trace_path, pipeline_schedule, ...); a key of Paddle's
  // location_optimizer dict counts as Paddle's.
  bool tiller_own = false;
};

class IpuOptions {
 public:
  // Every option at Paddle's default; none set.
  IpuOptions();

  // Sets one option. Returns a note for a no-effect option ("option 'X'
  // tunes the IPU toolchain and has no effect on Tiller"), "" otherwise.
  // Containers add to the value, as Paddle's setters do: a map's keys are
  // merged in (a key given again takes the new value), a list's items
  // appended (dot_checks and hardware_instrumentations are sets: sorted,
  // once each). location_optimizer's keys set its location_optimizer.<key>
  // options. Throws tiller::Error (kInvalidArgument):
  //   unknown name        "unknown option 'X'; valid options: a, b, ..."
  //   wrong type          "option 'X' takes a bool, got 'yes'"
  //   not implemented     "option X=2 is not implemented by Tiller yet (supported: 1)"
  // A failed Set changes nothing.
  std::string Set(const std::string& name, const OptionValue& value);

  // Paddle's IpuStrategy.add_custom_op: adds "paddle_op: P, domain: D, type:
  // T, version: V" to custom_ops, which Set refuses (read-only, as in Paddle).
  void AddCustomOp(const std::string& paddle_op, const std::string& popart_op,
                   const std::string& domain, int64_t version);

  // Paddle's grouped setters, with its cross checks (before anything is set):
  // SetGraphConfig refuses enable_manual_shard without num_ipus > 1
  // ("set_graph_config: enable_manual_shard needs num_ipus > 1"),
  // SetPipeliningConfig refuses pipelining without enable_manual_shard. The
  // options are then set as Set does, all or none.
  void SetGraphConfig(int64_t num_ipus = 1, bool is_training = true, int64_t micro_batch_size = 1,
                      bool enable_manual_shard = false);
  void SetPipeliningConfig(bool enable_pipelining = false, int64_t batches_per_step = 1,
                           bool enable_gradient_accumulation = false,
                           int64_t accumulation_factor = 1);
  void SetPrecisionConfig(bool enable_fp16 = false);

  // Paddle's compilation_progress_logger (set_options takes a callable for
  // it in Python): called as each step compiles with (progress, total),
  // total being the option compilation_progress_total. Empty: none.
  void SetCompilationProgressLogger(std::function<void(int progress, int total)> logger) {
    progress_logger_ = std::move(logger);
  }
  const std::function<void(int, int)>& CompilationProgressLogger() const {
    return progress_logger_;
  }

  // The current value: the default until set. Throws kNotFound for an
  // unknown name ("unknown option 'X'").
  OptionValue Get(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  int64_t GetInt(const std::string& name) const;
  double GetDouble(const std::string& name) const;
  std::string GetStr(const std::string& name) const;
  // Whether Set (or a grouped setter) gave the option a value.
  bool IsSet(const std::string& name) const;

  // What a training session makes of them.
  // Run() without arguments runs forward-only eval steps: is_training is
  // false or runtime_options.enable_eval is true.
  bool EvalOnly() const;
  // CPU threads of a step: num_threads, or every hardware thread when 0.
  int NumThreads() const;

  // Every option Tiller knows, sorted by name.
  static const std::vector<OptionSpec>& Specs();
  // The spec of `name`, or nullptr when Tiller does not know it.
  static const OptionSpec* FindSpec(const std::string& name);

 private:
  std::map<std::string, OptionValue> values_;  // every option: always present
  std::set<std::string> set_;                  // names given a value by the caller
  std::function<void(int, int)> progress_logger_;
};

}  // namespace tiller::training
