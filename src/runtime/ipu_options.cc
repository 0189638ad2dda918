// include/tiller/ipu_options.h: Paddle's IpuStrategy option set, its
// defaults (paddle/fluid/platform/device/ipu/ipu_strategy.h) and what
// Tiller does with each option.
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

namespace tiller::training {
namespace {

using Support = OptionSupport;

void RequireOneOf(const std::string& name, const OptionValue& value, const OptionValue& converted,
                  std::initializer_list<const char*> choices);
template <typename ValueOf>
OptionMap WithLocationKeys(const std::vector<OptionSpec>& specs, const std::string& group,
                           OptionMap stored, ValueOf value_of);

std::vector<OptionSpec> MakeSpecs() {
  std::vector<OptionSpec> specs = {
      // Honoured.
      {"is_training", Support::kHonoured, true,
       "false: Run() runs forward-only eval steps (no gradients, no updates)"},
      {"micro_batch_size", Support::kHonoured, int64_t{1},
       "rows of a micro-batch: a data variable's dynamic (-1) first dim (a feed holds "
       "batches_per_step x accumulation_factor x replicas micro-batches)"},
      {"random_seed", Support::kHonoured, int64_t{0},
       "seed of random ops (dropout masks) whose own seed is 0"},
      {"runtime_options.enable_eval", Support::kHonoured, false,
       "true: Run() runs forward-only eval steps (dropout off, running statistics)"},
      {"use_no_bias_optimizer", Support::kHonoured, false,
       "Adam, AdamW and Lamb without bias correction"},
      // PopART's floating-point checks (Paddle's FLAGS_check_nan_inf). Off,
      // the loss and every gradient are still checked before any update.
      {"enable_floating_point_checks", Support::kHonoured, false,
       "check every op's output for NaN/Inf, naming the step and the first op"},
      // Tiller's own (Paddle's CPU executor uses its math-library thread
      // setting the same way).
      {"num_threads", Support::kHonoured, int64_t{0},
       "CPU threads of a step; 0: every hardware thread, at least one per device"},
      // Would change results: only the default until implemented.
      {"num_ipus", Support::kHonoured, int64_t{1},
       "devices of all replicas (replicated_graph_count x devices per replica)"},
      {"enable_manual_shard", Support::kHonoured, false,
       "each op on the device of its ipu_index (ipu_shard_guard)"},
      {"need_avg_shard", Support::kHonoured, false,
       "with enable_manual_shard: split the program into stages of about equal cost, replacing "
       "its ipu_index (Paddle split evenly by op count)"},
      {"enable_pipelining", Support::kHonoured, false,
       "pipeline the shards: devices work on different micro-batches at once"},
      // popart::RecomputationType: 0 none, 1 standard, 2 norm-only, 3 pipeline, 4 all.
      {"auto_recomputation", Support::kHonoured, int64_t{0},
       "1: backward ops recompute activations from matmul / conv outputs; 3, 4: from stage "
       "inputs only; 0: none"},
      // Tiller's own: a trace of every step (Chrome / Perfetto JSON).
      {"trace_path", Support::kHonoured, std::string(""),
       "write a Chrome / Perfetto trace of the steps to this file ('' : off)"},
      // Tiller's own (PopART's AnchorReturnType, which Paddle fixed at All):
      // which micro-batches' fetched values a run returns.
      {"anchor_return_type", Support::kHonoured, std::string("all"),
       "fetches of 'all' micro-batches, the 'final' one, 'every_n' batches, or their 'sum'"},
      {"anchor_return_period", Support::kHonoured, int64_t{1},
       "every_n: return every this many batches (must divide batches_per_step)"},
      // Tiller's own: the device profile every compiled step must fit.
      {"device_profile", Support::kHonoured, std::string(""),
       "check each step fits this profile (cpu, ipu-mk2, ipu-bow, h200, NAME:CAPACITY); '' : off"},
      // Tiller's own: interleaved stages of the automatic split.
      {"stages_per_device", Support::kHonoured, int64_t{1},
       "with pipelining and need_avg_shard: stages per device of the split by cost, "
       "interleaved (device d runs stages d, d + devices, ...: a shorter pipeline fill and "
       "drain)"},
      // Tiller's own: what the automatic split balances.
      {"auto_split_cost", Support::kHonoured, std::string("estimated"),
       "the automatic split balances 'estimated' costs (flops and bytes per op) or 'measured' "
       "ones (the step's forward and backward timed on one device first, per op)"},
      // Tiller's own: how each pipeline device orders its work.
      {"pipeline_schedule", Support::kHonoured, std::string("1f1b"),
       "'1f1b' (backward first, at most pipeline_in_flight micro-batches in flight) or "
       "'fill_drain' (every forward first: the whole window in flight)"},
      {"pipeline_in_flight", Support::kHonoured, int64_t{0},
       "1f1b: micro-batches in flight (activations stashed) per replica, at least the stages; "
       "0: the stages + 1 (the first stage runs a forward ahead)"},
      // Tiller's own: replicas sum their gradients in messages of this size.
      {"all_reduce_bucket_bytes", Support::kHonoured, int64_t{32} << 20,
       "replicas: gradients are summed in messages of at most this many bytes (0: one "
       "message per gradient)"},
      // Tiller's own: a replica's devices (pipeline stages) spread over
      // this many processes of an MPI job.
      {"processes_per_replica", Support::kHonoured, int64_t{1},
       "enable_distribution: each replica's devices (num_ipus / replicated_graph_count, its "
       "pipeline stages) spread over this many consecutive ranks of the job, each running its "
       "share; values cross between them as MPI messages"},
      {"overlap_all_reduce", Support::kHonoured, true,
       "replicas without accumulation: each bucket's reduction starts in the backward pass "
       "and runs beside it"},
      {"batches_per_step", Support::kHonoured, int64_t{1}, "updates (batches) run by one step"},
      // PopART's; Tiller's compilation reports progress to the logger
      // (set_options({'compilation_progress_logger': fn})) in its units.
      {"compilation_progress_total", Support::kHonoured, int64_t{100},
       "the total the compilation_progress_logger's progress counts to"},
      {"enable_gradient_accumulation", Support::kHonoured, false,
       "accumulate gradients over accumulation_factor micro-batches"},
      {"accumulation_factor", Support::kHonoured, int64_t{1},
       "micro-batches whose gradients one update applies"},
      // popart::ReductionType; Paddle's IpuStrategy sets Mean.
      {"accumulation_and_replication_reduction_type", Support::kHonoured, int64_t{1},
       "how accumulated (and replicated) gradients combine: 0 sum, 1 mean, 2 no reduction "
       "(summed: PopART treated every type but mean as a sum)"},
      // Paddle's dygraph-to-static training: IpuStrategy.set_optimizer sets
      // both; the learning rate is then `lr` (Paddle's patched
      // LRScheduler.step sets it) instead of the program's variable.
      {"is_dynamic", Support::kHonoured, false,
       "the learning rate of every step is the option lr (Paddle's dygraph-to-static path)"},
      {"lr", Support::kHonoured, 0.0, "with is_dynamic: the learning rate of the next steps"},
      {"enable_fp16", Support::kHonoured, false,
       "half precision: matmul / linear / conv2d multiply in half_dtype with float32 "
       "accumulation; weights, gradients and the optimizer stay float32"},
      // Tiller's own: Paddle AMP's dynamic loss scaling, its defaults for
      // static programs (paddle.static.amp.decorate).
      {"dynamic_loss_scaling", Support::kHonoured, false,
       "skip updates whose gradients overflow and adapt loss_scaling (the initial scale)"},
      {"dynamic_loss_scaling_settings.incr_every_n_steps", Support::kHonoured, int64_t{1000},
       "clean updates in a row before the scale grows"},
      {"dynamic_loss_scaling_settings.decr_every_n_nan_or_inf", Support::kHonoured, int64_t{2},
       "skipped updates in a row before the scale shrinks"},
      {"dynamic_loss_scaling_settings.incr_ratio", Support::kHonoured, 2.0,
       "factor the scale grows by"},
      {"dynamic_loss_scaling_settings.decr_ratio", Support::kHonoured, 0.8,
       "factor the scale shrinks by (not below 1)"},
      // Tiller's own: which half type enable_fp16 means.
      {"half_dtype", Support::kHonoured, std::string("auto"),
       "with enable_fp16: 'bfloat16', 'float16' (stored as float16, computed in float32 on CPUs) "
       "or 'auto' (bfloat16 where the CPU multiplies it: AVX512_BF16 or AMX, else float16)"},
      // Storage of optimizer accumulators (paddle::OptimizerAccumulators).
      {"accl1_type", Support::kHonoured, std::string("FLOAT"),
       "'FLOAT' or 'FLOAT16': first-moment state (Adam/Lamb Moment1, Adamax/Adagrad Moment, "
       "Adadelta AvgSquaredGrad, RMSProp MeanSquare)"},
      {"accl2_type", Support::kHonoured, std::string("FLOAT"),
       "'FLOAT' or 'FLOAT16': second-moment state (Adam/Lamb Moment2, Adamax InfNorm, Adadelta "
       "AvgSquaredUpdate, RMSProp MeanGrad)"},
      {"accl3_type", Support::kHonoured, std::string("FLOAT"),
       "'FLOAT' or 'FLOAT16': RMSProp's Moment"},
      // Would change results with enable_fp16: refused until implemented.
      {"enable_stochastic_rounding", Support::kHonoured, false,
       "training: round float32 to half types stochastically (seeded by random_seed, per step)"},
      {"enable_half_partial", Support::kNotYet, false,
       "half-precision partial sums in matmul / conv: Tiller's half precision accumulates in "
       "float32, so True is refused rather than computed otherwise than asked"},
      {"automatic_loss_scaling_settings.enabled", Support::kHonoured, false,
       "automatic loss scaling (with enable_fp16): the scale follows gradient statistics"},
      {"automatic_loss_scaling_settings.bin_edge_location", Support::kHonoured, 0.0625,
       "the statistics' bin edge, as a fraction of the half type's largest value"},
      {"automatic_loss_scaling_settings.threshold_upper_count_proportion", Support::kHonoured, 1e-7,
       "the share of counts above the edge beyond which the scale halves"},
      {"automatic_loss_scaling_settings.update_period", Support::kHonoured, int64_t{1},
       "updates between scale changes"},
      // Tiller's own: the counts without automatic loss scaling.
      {"gradient_statistics", Support::kHonoured, false,
       "with enable_fp16: count gradient elements flushed to zero / beyond the bin edge"},
      {"loss_scaling", Support::kHonoured, 1.0,
       "static loss scale: the backward pass starts from it, the update divides it out"},
      {"enable_replicated_graphs", Support::kHonoured, false, "data-parallel replicas"},
      // set_options({'location_optimizer': {...}}) sets these keys (Paddle's
      // IpuStrategy sets use_replicated_tensor_sharding by default).
      {"location_optimizer.use_replicated_tensor_sharding", Support::kHonoured, true,
       "with replicas: each keeps 1/replicas of the optimizer state (results unchanged)"},
      {"location_optimizer.min_elements_for_replicated_tensor_sharding", Support::kHonoured,
       int64_t{8192}, "weights with fewer elements keep their optimizer state whole"},
      {"replicated_graph_count", Support::kHonoured, int64_t{1},
       "replicas, each training on its share of the micro-batches"},
      // popart::MeanReductionStrategy: 1 Post (divide the summed gradients
      // once; Paddle's IpuStrategy default), 0 Running (a running mean per
      // micro-batch, other rounding): Tiller divides once.
      {"mean_accumulation_and_replication_reduction_strategy", Support::kNotYet, int64_t{1},
       "how a mean reduction divides: 1 post (sum, then divide once: Tiller's), 0 running (a "
       "running mean per micro-batch: the same mean, other rounding), refused"},
      // popart::SyntheticDataMode: 0 off; the others replace the host's data
      // by zeros or random values.
      {"synthetic_data_mode", Support::kHonoured, int64_t{0},
       "training: 0 the feeds' data; 1 zeros instead (PopART's Zeros); 2 standard-normal draws "
       "for float feeds, zeros for the others (RandomNormal; repeatable by random_seed)"},
      // Several processes of an MPI job (mpirun), each feeding its own
      // replicas' part of the global batch: the replicas' collectives run
      // over MPI (libtiller_mpi.so). The factor and offset are checked
      // against the job.
      {"enable_distribution", Support::kHonoured, false,
       "replicas across the processes of an MPI job (mpirun -np N)"},
      {"enable_distributed_replicated_graphs", Support::kHonoured, false,
       "replicas across processes (with enable_distribution)"},
      {"global_replication_factor", Support::kHonoured, int64_t{1},
       "replicas over all processes: processes x replicated_graph_count"},
      {"global_replica_offset", Support::kHonoured, int64_t{0},
       "this process's first replica: rank x replicated_graph_count"},
      // PopART's Lamb clamps the weight norm of its trust ratio here; Paddle's
      // lamb op, which Tiller runs, has no clamp.
      {"max_weight_norm", Support::kHonoured, 65504.0,
       "Lamb: the trust ratio uses min(||w||, max_weight_norm), as PopART's Lamb (Paddle's "
       "lamb op has no clamp; at the default a weight's norm rarely reaches it); 0: no clamp"},
      // Tiller applies weight decay as the program's optimizer op says (adamw
      // and lamb decoupled, a regularizer as L2); the option cannot override.
      {"weight_decay_mode", Support::kNotYet, std::string(""),
       "'decay' or 'l2_regularization' override of how weight decay applies; Tiller applies "
       "it as the program's optimizer op says (adamw / lamb decoupled, a regularizer as L2)"},
  };
  // Options of Paddle/PopART that tune the IPU toolchain: no meaning on
  // Tiller's backends. Each keeps the type Paddle's registry
  // (ipu_strategy.cc) gives it and PopART's default (SDK 2.6
  // sessionoptions.hpp, or Paddle's own), so get_option reads as on an IPU
  // build and set_options checks the type.
  //
  // TensorLocationSettings (tensorlocation.hpp), which Paddle's set_options
  // takes as a dict {key: integer} per location_* name and cannot read back:
  // PopART's default is on chip, no sharding, compute tiles, 2 and 8192
  // elements. Where a tensor lives changes no value.
  const OptionMap popart_location = {{"on_chip", "1"},
                                     {"use_replicated_tensor_sharding", "0"},
                                     {"min_elements_for_off_chip", "2"},
                                     {"min_elements_for_replicated_tensor_sharding", "8192"},
                                     {"use_io_tiles_to_load", "0"},
                                     {"use_io_tiles_to_store", "0"}};
  const std::vector<std::pair<const char*, OptionValue>> toolchain = {
      // PopART's defaultPrefetchBufferingDepth was 1; SDK 2.6 deprecates it
      // for defaultBufferingDepth (1) and leaves it at a sentinel until set.
      {"default_prefetch_buffering_depth", int64_t{1}},
      // Paddle's: the keys of location_optimizer Tiller has no option for
      // (sharding_domain_with_*) are kept here; get_option adds the
      // location_optimizer.<key> options (Paddle's IpuStrategy sets on_chip
      // 0 and use_replicated_tensor_sharding 1).
      {"location_optimizer", OptionMap{}},
      {"location_optimizer.on_chip", false},
      {"location_optimizer.min_elements_for_off_chip", int64_t{2}},
      {"location_optimizer.use_io_tiles_to_load", false},
      {"location_optimizer.use_io_tiles_to_store", false},
      {"location_weight", popart_location},
      {"location_activation", popart_location},
      {"location_accumulator", popart_location},
      // Poplar's option maps: empty until set.
      {"engine_options", OptionMap{}},
      {"convolution_options", OptionMap{}},
      {"lstm_options", OptionMap{}},
      {"report_options", OptionMap{}},
      {"gcl_options", OptionMap{}},
      // custom_ops lists add_custom_op's ops (read-only in Paddle);
      // dot_checks are IR stages ('Fwd0', ..., 'Final'), hardware
      // instrumentations popart::Instrumentation numbers (0 Outer, PopART's
      // default, 1 Inner), custom_codelets source files.
      {"custom_ops", OptionList{}},
      {"dot_checks", OptionList{}},
      {"hardware_instrumentations", OptionList{"0"}},
      {"custom_codelets", OptionList{}},
      {"available_memory_proportion", 0.0},
      {"scaled_optimizer_state", false},
      {"onnx_dump_path", std::string("")},
      {"enable_outlining", true},
      {"partials_type_matmuls", std::string("")},
      {"enable_prefetch_datastreams", true},
      {"cache_path", std::string("session_cache")},
      {"enable_engine_caching", false},
      {"enable_non_stable_softmax", false},
      {"enable_stable_norm", false},
      {"autodiff_settings.stitch_strategy", int64_t{1}},
      {"batch_serialization_settings.transform_context", int64_t{0}},
      {"batch_serialization_settings.method", int64_t{0}},
      {"batch_serialization_settings.batch_schedule", int64_t{1}},
      {"batch_serialization_settings.factor", int64_t{0}},
      {"batch_serialization_settings.concat_on_virtual_graph_change", true},
      {"batch_serialization_settings.concat_on_execution_phase_change", true},
      {"batch_serialization_settings.concat_on_pipeline_stage_change", true},
      {"merge_var_update", int64_t{0}},
      {"merge_var_update_mem_threshold", int64_t{1000000}},
      {"virtual_graph_mode", int64_t{0}},
      {"subgraph_copying_strategy", int64_t{0}},
      {"log_dir", std::string("")},
      {"custom_codelet_compile_flags", std::string("")},
      {"serialized_poprithms_shift_graphs_dir", std::string("")},
      {"kahn_tie_breaker", std::string("greedy")},
      {"execution_phase_settings.phases", int64_t{0}},
      {"execution_phase_settings.stages", int64_t{2}},
      {"first_dot_op", int64_t{0}},
      {"final_dot_op", int64_t{10000}},
      {"num_io_tiles", int64_t{0}},
      {"loose_threshold_at_peak", int64_t{8000}},
      {"swap_limit_scheduler", int64_t{1000000000}},
      {"transitive_closure_optimization_threshold", int64_t{100000}},
      // PopART's (set as dicts in Paddle): the outer fragment's schedule and
      // which collectives merge; where and when work runs, not what it gives.
      {"accumulate_outer_fragment", OptionMap{}},
      {"replicated_collectives_settings", OptionMap{}},
      {"create_implicit_pipelining_fwd_only_program", false},
      // Paddle's model-runtime executor (PopEF) and its buffers, batching
      // timeout and tiles: another IPU executor of the same program.
      {"enable_model_runtime_executor", false},
      {"num_buffers", int64_t{10}},
      {"timeout_ms", 0.0},
      {"tiles_per_ipu", int64_t{4}},
      {"strict_op_versions", true},
      {"opx_alias_checking", false},
      {"opx_modify_checking", false},
      {"dot_op_names", false},
      {"export_poplar_computation_graph", false},
      {"export_poplar_vertex_graph", false},
      {"separate_call_op_pdfs", true},
      {"enable_outlining_copy_cost_pruning", true},
      {"rearrange_anchors_on_host", true},
      {"instrument_with_hardware_cycle_counter", false},
      {"disable_grad_accumulation_tensor_streams", false},
      {"compile_engine", true},
      {"constant_weights", true},
      {"enable_merge_exchange", true},
      {"explicit_recomputation", false},
      {"enable_explicit_main_loops", false},
      {"use_host_copy_ops", false},
      {"alias_zero_copy", false},
      {"delay_var_updates", true},
      {"enable_fully_connected_pass", true},
      {"enable_serialized_matmuls", true},
      {"decompose_grad_sum", false},
      {"group_host_sync", false},
      {"enable_supported_data_type_casting", true},
      {"group_norm_strided_channel_grouping", false},
      {"schedule_non_weight_update_gradient_consumers_early", false},
      {"outline_sequence_break_cost", 10000.0},
      {"outline_threshold", 1.0},
      {"time_limit_scheduler", 1000000000.0},
  };
  for (const auto& [name, value] : toolchain)
    specs.push_back({name, Support::kNoEffect, value, "IPU toolchain setting; no effect"});
  // Paddle's (2.x before SDK 2.6): with enable_fp16, casts to float32 become
  // casts to float16. Tiller's enable_fp16 keeps float32 outside the
  // matmul / conv multiplies, so its casts stay as the program says.
  specs.push_back({"transfer_cast_op", Support::kNoEffect, true,
                   "with enable_fp16 on an IPU: casts to float32 become float16 ones; no effect "
                   "(Tiller's half precision keeps the program's casts)"});
  // Tiller's own options (docs/MIGRATION.md lists them apart).
  static constexpr std::array<std::string_view, 20> kTillerOwn = {
      "all_reduce_bucket_bytes",
      "anchor_return_period",
      "anchor_return_type",
      "auto_split_cost",
      "automatic_loss_scaling_settings.update_period",
      "device_profile",
      "dynamic_loss_scaling",
      "dynamic_loss_scaling_settings.decr_every_n_nan_or_inf",
      "dynamic_loss_scaling_settings.decr_ratio",
      "dynamic_loss_scaling_settings.incr_every_n_steps",
      "dynamic_loss_scaling_settings.incr_ratio",
      "gradient_statistics",
      "half_dtype",
      "num_threads",
      "overlap_all_reduce",
      "pipeline_in_flight",
      "pipeline_schedule",
      "processes_per_replica",
      "stages_per_device",
      "trace_path"};
  for (OptionSpec& spec : specs)
    spec.tiller_own =
        std::find(kTillerOwn.begin(), kTillerOwn.end(), spec.name) != kTillerOwn.end();
  std::sort(specs.begin(), specs.end(),
            [](const OptionSpec& a, const OptionSpec& b) { return a.name < b.name; });
  // location_optimizer reads as its keys: its default from theirs.
  OptionSpec& group = *std::find_if(specs.begin(), specs.end(), [](const OptionSpec& s) {
    return s.name == "location_optimizer";
  });
  group.default_value = WithLocationKeys(specs, group.name, OptionMap{},
                                         [](const OptionSpec& s) { return *s.default_value; });
  return specs;
}

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

std::string LocationWord(const OptionValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "1" : "0";
  return fmt::format("{}", std::get<int64_t>(v));
}

// `stored` with the key of each option "<group>.<key>" set to its value
// (value_of(spec)) as the group's dict spells it.
template <typename ValueOf>
OptionMap WithLocationKeys(const std::vector<OptionSpec>& specs, const std::string& group,
                           OptionMap stored, ValueOf value_of) {
  const std::string prefix = group + ".";
  for (const OptionSpec& s : specs) {
    if (s.name.starts_with(prefix))
      stored[s.name.substr(prefix.size())] = LocationWord(value_of(s));
  }
  return stored;
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

const std::vector<OptionSpec>& IpuOptions::Specs() {
  static const std::vector<OptionSpec> specs = MakeSpecs();
  return specs;
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
  if (name == "all_reduce_bucket_bytes" && std::get<int64_t>(*converted) < 0)
    Fail(ErrorKind::kInvalidArgument,
         "option 'all_reduce_bucket_bytes' must be >= 0 (0: one message per gradient), got {}",
         OptionValueRepr(value));
  if (name == "processes_per_replica" && std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'processes_per_replica' must be >= 1, got {}",
         OptionValueRepr(value));
  if (name == "stages_per_device" && std::get<int64_t>(*converted) < 1)
    Fail(ErrorKind::kInvalidArgument, "option 'stages_per_device' must be >= 1, got {}",
         OptionValueRepr(value));
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
    return WithLocationKeys(Specs(), name, std::get<OptionMap>(value),
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
