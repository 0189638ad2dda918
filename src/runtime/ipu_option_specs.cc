// The IpuOptions registry's table (ipu_option_specs.h).
#include "runtime/ipu_option_specs.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace tiller::runtime {
namespace {

using training::OptionList;
using training::OptionMap;
using training::OptionSpec;
using training::OptionValue;
using Support = training::OptionSupport;

}  // namespace

std::vector<OptionSpec> MakeIpuOptionSpecs() {
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
      {"shard_embedding_rows", Support::kHonoured, false,
       "replicas: each keeps 1 / replicas of the rows of every sparse embedding table (and "
       "of its optimizer state); lookups and row updates exchange ids and rows"},
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
      {"block_sparse_weights", Support::kHonoured, std::string(""),
       "training: weights the program keeps pruned in 16 x 16 blocks, or 1 x 8 where an entry "
       "ends in ':1x8' (comma-separated names, or 'masked': every weight multiplied by a mask "
       "after its update, as Paddle's ASP does) multiply only their nonzero blocks; results "
       "unchanged"},
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
  static constexpr std::array<std::string_view, 22> kTillerOwn = {
      "all_reduce_bucket_bytes",
      "anchor_return_period",
      "anchor_return_type",
      "auto_split_cost",
      "automatic_loss_scaling_settings.update_period",
      "block_sparse_weights",
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
      "shard_embedding_rows",
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

std::string LocationWord(const OptionValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "1" : "0";
  return fmt::format("{}", std::get<int64_t>(v));
}

}  // namespace tiller::runtime

namespace tiller::training {

const std::vector<OptionSpec>& IpuOptions::Specs() {
  static const std::vector<OptionSpec> specs = runtime::MakeIpuOptionSpecs();
  return specs;
}

}  // namespace tiller::training
