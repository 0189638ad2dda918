// tiller::training::IpuOptions (include/tiller/ipu_options.h), through the
// public header only: Paddle's option names and defaults, the messages
// tiller.IpuStrategy shows (tests/python/training_api_test.py matches them
// from Python), type conversions, and that a refused option changes nothing.
#include "tiller/ipu_options.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <variant>

namespace {

using tiller::training::IpuOptions;
using tiller::training::OptionSpec;
using tiller::training::OptionSupport;
using tiller::training::OptionValue;
using tiller::training::OptionValueRepr;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const tiller::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IpuOptionsTest, DefaultsArePaddles) {
  IpuOptions o;
  EXPECT_TRUE(o.GetBool("is_training"));
  EXPECT_EQ(o.GetInt("micro_batch_size"), 1);
  EXPECT_EQ(o.GetInt("num_ipus"), 1);
  EXPECT_EQ(o.GetInt("accumulation_factor"), 1);
  EXPECT_EQ(o.GetDouble("loss_scaling"), 1.0);
  EXPECT_FALSE(o.GetBool("runtime_options.enable_eval"));
  EXPECT_FALSE(o.GetBool("enable_fp16"));
  EXPECT_FALSE(o.EvalOnly());
  EXPECT_GE(o.NumThreads(), 1);  // num_threads 0: every hardware thread
  EXPECT_FALSE(o.IsSet("micro_batch_size"));
}

TEST(IpuOptionsTest, HonouredOptionsAreSetAndConverted) {
  IpuOptions o;
  EXPECT_EQ(o.Set("micro_batch_size", int64_t{8}), "");
  EXPECT_EQ(o.GetInt("micro_batch_size"), 8);
  EXPECT_TRUE(o.IsSet("micro_batch_size"));
  o.Set("random_seed", 42.0);  // an integral double is an integer
  EXPECT_EQ(o.GetInt("random_seed"), 42);
  o.Set("enable_floating_point_checks", int64_t{1});  // 0/1 are bools, as in Python
  EXPECT_TRUE(o.GetBool("enable_floating_point_checks"));
  o.Set("num_threads", int64_t{3});
  EXPECT_EQ(o.NumThreads(), 3);
  o.Set("runtime_options.enable_eval", true);
  EXPECT_TRUE(o.EvalOnly());
  o.Set("runtime_options.enable_eval", false);
  o.SetGraphConfig(1, /*is_training=*/false, 4);
  EXPECT_TRUE(o.EvalOnly());
  EXPECT_EQ(o.GetInt("micro_batch_size"), 4);
  // The default of a not-yet option is accepted; numbers in any lossless spelling.
  o.Set("enable_stochastic_rounding", int64_t{0});
  o.Set("loss_scaling", int64_t{1});
  o.Set("accumulation_factor", 1.0);
  o.SetPipeliningConfig();
  o.SetPrecisionConfig(false);
}

TEST(IpuOptionsTest, RefusalsNameTheOptionAndChangeNothing) {
  IpuOptions o;
  std::string msg = ErrorOf([&] { o.Set("no_such_option", int64_t{1}); });
  EXPECT_NE(msg.find("unknown option 'no_such_option'; valid options: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("accl3_type, accumulate_outer_fragment, "
                     "accumulation_and_replication_reduction_type, accumulation_factor"),
            std::string::npos)
      << "sorted, honoured and no-effect names together: " << msg;
  EXPECT_NE(ErrorOf([&] { o.Set("accl1_type", std::string("BFLOAT16")); }).find("accl1_type"),
            std::string::npos);
  EXPECT_EQ(ErrorOf([&] { o.Set("enable_half_partial", true); }),
            "option enable_half_partial=True is not implemented by Tiller yet (supported: "
            "False)");
  EXPECT_EQ(ErrorOf([&] { o.Set("half_dtype", std::string("fp8")); }),
            "option 'half_dtype' takes 'auto', 'bfloat16' or 'float16', got 'fp8'");
  EXPECT_EQ(ErrorOf([&] { o.Set("pipeline_schedule", std::string("gpipe")); }),
            "option 'pipeline_schedule' takes '1f1b' or 'fill_drain', got 'gpipe'");
  EXPECT_EQ(ErrorOf([&] { o.Set("replicated_graph_count", int64_t{0}); }),
            "option 'replicated_graph_count' must be >= 1, got 0");
  EXPECT_EQ(ErrorOf([&] { o.Set("accumulation_factor", int64_t{0}); }),
            "option 'accumulation_factor' must be >= 1, got 0");
  EXPECT_EQ(ErrorOf([&] { o.Set("batches_per_step", int64_t{-1}); }),
            "option 'batches_per_step' must be >= 1, got -1");
  EXPECT_EQ(ErrorOf([&] { o.Set("accumulation_and_replication_reduction_type", int64_t{5}); }),
            "option accumulation_and_replication_reduction_type takes 0 (sum), 1 (mean) or 2 (no "
            "reduction: summed, as PopART did), got 5");
  EXPECT_EQ(ErrorOf([&] { o.Set("synthetic_data_mode", int64_t{3}); }),
            "option synthetic_data_mode takes 0 (off), 1 (zeros) or 2 (random normal), got 3");
  EXPECT_EQ(ErrorOf([&] { o.Set("compilation_progress_total", int64_t{0}); }),
            "option 'compilation_progress_total' must be >= 1, got 0");
  EXPECT_EQ(ErrorOf([&] { o.Set("micro_batch_size", int64_t{0}); }),
            "option 'micro_batch_size' must be >= 1, got 0");
  EXPECT_EQ(ErrorOf([&] { o.Set("loss_scaling", 0.0); }),
            "option 'loss_scaling' must be a finite number > 0, got 0.0");
  EXPECT_EQ(ErrorOf([&] { o.Set("micro_batch_size", std::string("eight")); }),
            "option 'micro_batch_size' takes an integer, got 'eight'");
  EXPECT_EQ(ErrorOf([&] { o.Set("is_training", int64_t{2}); }),
            "option 'is_training' takes a bool, got 2");
  EXPECT_EQ(ErrorOf([&] { o.SetGraphConfig(1, true, 1, /*enable_manual_shard=*/true); }),
            "set_graph_config: enable_manual_shard needs num_ipus > 1");
  EXPECT_EQ(ErrorOf([&] { o.SetPipeliningConfig(/*enable_pipelining=*/true); }),
            "set_pipelining_config: pipelining needs enable_manual_shard "
            "(set_graph_config(enable_manual_shard=True))");
  EXPECT_EQ(ErrorOf([&] { o.Get("nope"); }), "unknown option 'nope'");
  EXPECT_EQ(ErrorOf([&] { o.SetPipeliningConfig(false, /*batches_per_step=*/4, true, 0); }),
            "option 'accumulation_factor' must be >= 1, got 0");
  EXPECT_EQ(o.GetInt("batches_per_step"), 1) << "a refused grouped setter sets none of its options";
  EXPECT_EQ(ErrorOf([&] { o.SetGraphConfig(2, true, 1, /*enable_manual_shard=*/true); }),
            "(no error)");
  EXPECT_EQ(o.GetInt("num_ipus"), 2);
  o.SetGraphConfig();
  EXPECT_FALSE(o.GetBool("enable_fp16"));
  EXPECT_EQ(o.GetInt("micro_batch_size"), 1);
  EXPECT_TRUE(o.GetBool("is_training"));
  EXPECT_FALSE(o.GetBool("enable_pipelining"));
  EXPECT_EQ(o.GetInt("num_ipus"), 1);
  EXPECT_EQ(o.GetInt("accumulation_factor"), 1);
  EXPECT_EQ(o.GetInt("batches_per_step"), 1);
  EXPECT_EQ(o.GetInt("accumulation_and_replication_reduction_type"), 1);
}

TEST(IpuOptionsTest, NoEffectOptionsAreKeptWithANote) {
  IpuOptions o;
  // Paddle's type and PopART's default, as an IPU build reads them.
  EXPECT_EQ(o.GetDouble("available_memory_proportion"), 0.0);
  EXPECT_TRUE(o.GetBool("enable_outlining"));
  EXPECT_EQ(o.GetInt("batch_serialization_settings.factor"), 0);
  EXPECT_EQ(std::get<std::string>(o.Get("cache_path")), "session_cache");
  EXPECT_FALSE(o.IsSet("enable_outlining"));
  EXPECT_EQ(ErrorOf([&] { o.Set("enable_outlining", std::string("yes")); }),
            "option 'enable_outlining' takes a bool, got 'yes'");
  EXPECT_EQ(ErrorOf([&] { o.Set("outline_threshold", std::string("high")); }),
            "option 'outline_threshold' takes a number, got 'high'");
  EXPECT_EQ(o.Set("available_memory_proportion", 0.5),
            "option 'available_memory_proportion' tunes the IPU toolchain and has no effect on "
            "Tiller");
  EXPECT_EQ(o.GetDouble("available_memory_proportion"), 0.5);
  EXPECT_EQ(ErrorOf([&] { o.Set("engine_options", std::string("{'debug.instrument': 'true'}")); }),
            "option 'engine_options' takes a dict of strings, got \"{'debug.instrument': "
            "'true'}\"");
}

// Paddle's container options (ipu_strategy.cc's container_options with
// vector / map getters, and SetTensorLocation's location_* dicts): typed,
// PopART's defaults, added to as Paddle's setters add.
TEST(IpuOptionsTest, ContainerOptionsHavePaddlesTypesAndAddUp) {
  using tiller::training::OptionList;
  using tiller::training::OptionMap;
  using tiller::training::OptionTypeName;
  IpuOptions o;
  EXPECT_EQ(std::get<OptionMap>(o.Get("convolution_options")), OptionMap{});
  EXPECT_STREQ(OptionTypeName(o.Get("gcl_options")), "map");
  EXPECT_STREQ(OptionTypeName(o.Get("custom_codelets")), "vector");
  EXPECT_STREQ(OptionTypeName(o.Get("default_prefetch_buffering_depth")), "uint64");
  EXPECT_STREQ(OptionTypeName(o.Get("transfer_cast_op")), "bool");
  // PopART's hardwareInstrumentations default {Instrumentation::Outer}.
  EXPECT_EQ(std::get<OptionList>(o.Get("hardware_instrumentations")), OptionList{"0"});
  // Maps merge keys (a key given again takes its new value).
  EXPECT_NE(o.Set("engine_options", OptionMap{{"debug.instrument", "true"}}), "");
  o.Set("engine_options", OptionMap{{"autoReport.all", "true"}, {"debug.instrument", "false"}});
  EXPECT_EQ(std::get<OptionMap>(o.Get("engine_options")),
            (OptionMap{{"autoReport.all", "true"}, {"debug.instrument", "false"}}));
  // Lists append; dot checks and instrumentations are sets.
  o.Set("custom_codelets", OptionList{"a.cpp"});
  o.Set("custom_codelets", OptionList{"b.cpp", "a.cpp"});
  EXPECT_EQ(std::get<OptionList>(o.Get("custom_codelets")),
            (OptionList{"a.cpp", "b.cpp", "a.cpp"}));
  o.Set("dot_checks", OptionList{"Fwd1", "Final", "Fwd1"});
  EXPECT_EQ(std::get<OptionList>(o.Get("dot_checks")), (OptionList{"Final", "Fwd1"}));
  o.Set("hardware_instrumentations", OptionList{"1"});
  EXPECT_EQ(std::get<OptionList>(o.Get("hardware_instrumentations")), (OptionList{"0", "1"}));
  EXPECT_EQ(ErrorOf([&] { o.Set("dot_checks", OptionList{"Bwd1"}); }),
            "option 'dot_checks' takes 'Fwd0', 'Fwd1', 'Bwd0', 'PreAlias' or 'Final', got 'Bwd1'");
  EXPECT_EQ(ErrorOf([&] { o.Set("hardware_instrumentations", OptionList{"2"}); }),
            "option 'hardware_instrumentations' takes 0 (outer) or 1 (inner), got '2'");
  EXPECT_EQ(ErrorOf([&] { o.Set("custom_codelets", std::string("a.cpp")); }),
            "option 'custom_codelets' takes a list of strings, got 'a.cpp'");
  EXPECT_EQ(std::get<OptionList>(o.Get("dot_checks")), (OptionList{"Final", "Fwd1"}))
      << "a refused item adds none";
  // custom_ops: add_custom_op's, in IpuCustomOpIdentifier::repr()'s words.
  EXPECT_EQ(ErrorOf([&] { o.Set("custom_ops", OptionList{}); }),
            "option 'custom_ops' is read-only (as in Paddle): add_custom_op adds to it");
  o.AddCustomOp("custom_relu", "Relu", "custom.ops", 1);
  EXPECT_EQ(std::get<OptionList>(o.Get("custom_ops")),
            OptionList{"paddle_op: custom_relu, domain: custom.ops, type: Relu, version: 1"});
  EXPECT_EQ(OptionValueRepr(o.Get("dot_checks")), "['Final', 'Fwd1']");
  EXPECT_EQ(OptionValueRepr(OptionMap{{"k", "v"}, {"l", "it's"}}), "{'k': 'v', 'l': \"it's\"}");
  EXPECT_EQ(OptionValueRepr(OptionList{}), "[]");
}

TEST(IpuOptionsTest, LocationSettingsAreDictsOfPaddlesKeys) {
  using tiller::training::OptionMap;
  IpuOptions o;
  // PopART's TensorLocationSettings{TensorLocation(), 2, 8192}.
  const OptionMap popart = {{"min_elements_for_off_chip", "2"},
                            {"min_elements_for_replicated_tensor_sharding", "8192"},
                            {"on_chip", "1"},
                            {"use_io_tiles_to_load", "0"},
                            {"use_io_tiles_to_store", "0"},
                            {"use_replicated_tensor_sharding", "0"}};
  EXPECT_EQ(std::get<OptionMap>(o.Get("location_weight")), popart);
  // Paddle's IpuStrategy: the optimizer state off chip, sharded.
  OptionMap optimizer = popart;
  optimizer["on_chip"] = "0";
  optimizer["use_replicated_tensor_sharding"] = "1";
  EXPECT_EQ(std::get<OptionMap>(o.Get("location_optimizer")), optimizer);
  EXPECT_EQ(std::get<OptionMap>(*IpuOptions::FindSpec("location_optimizer")->default_value),
            optimizer);
  o.Set("location_activation", OptionMap{{"on_chip", "0"}, {"sharding_domain_with_all", "4"}});
  OptionMap activation = popart;
  activation["on_chip"] = "0";
  activation["sharding_domain_with_all"] = "4";
  EXPECT_EQ(std::get<OptionMap>(o.Get("location_activation")), activation);
  // location_optimizer's keys are its dotted options (Paddle: > 0 is on).
  EXPECT_EQ(
      o.Set("location_optimizer", OptionMap{{"use_replicated_tensor_sharding", "0"},
                                            {"min_elements_for_replicated_tensor_sharding", "16"}}),
      "")
      << "honoured keys only: no note";
  EXPECT_FALSE(o.GetBool("location_optimizer.use_replicated_tensor_sharding"));
  EXPECT_EQ(o.GetInt("location_optimizer.min_elements_for_replicated_tensor_sharding"), 16);
  o.Set("location_optimizer",
        OptionMap{{"on_chip", "2"}, {"sharding_domain_with_orthogonal", "2"}});
  EXPECT_TRUE(o.GetBool("location_optimizer.on_chip"));
  o.Set("location_optimizer.use_io_tiles_to_load", true);
  optimizer["on_chip"] = "1";
  optimizer["use_replicated_tensor_sharding"] = "0";
  optimizer["min_elements_for_replicated_tensor_sharding"] = "16";
  optimizer["use_io_tiles_to_load"] = "1";
  optimizer["sharding_domain_with_orthogonal"] = "2";
  EXPECT_EQ(std::get<OptionMap>(o.Get("location_optimizer")), optimizer);
  EXPECT_EQ(ErrorOf([&] {
              o.Set("location_weight", OptionMap{{"on_chips", "1"}});
            }),
            "option 'location_weight' has no setting 'on_chips' (Paddle's: on_chip, "
            "use_replicated_tensor_sharding, min_elements_for_off_chip, "
            "min_elements_for_replicated_tensor_sharding, use_io_tiles_to_load, "
            "use_io_tiles_to_store, sharding_domain_with_all, sharding_domain_with_consecutive, "
            "sharding_domain_with_orthogonal)");
  EXPECT_EQ(ErrorOf([&] {
              o.Set("location_optimizer",
                    OptionMap{{"use_replicated_tensor_sharding", "1"}, {"on_chip", "yes"}});
            }),
            "option 'location_optimizer' takes integers >= 0, got 'yes' for 'on_chip'");
  EXPECT_EQ(ErrorOf([&] { o.Set("location_weight", int64_t{1}); }),
            "option 'location_weight' takes a dict of strings, got 1");
  EXPECT_FALSE(o.GetBool("location_optimizer.use_replicated_tensor_sharding"))
      << "a refused dict sets none of its keys";
}

TEST(IpuOptionsTest, SpecsListEveryOptionOnceSorted) {
  const auto& specs = IpuOptions::Specs();
  int honoured = 0, not_yet = 0, no_effect = 0, no_default = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) {
      EXPECT_LT(specs[i - 1].name, specs[i].name);
    }
    honoured += specs[i].support == OptionSupport::kHonoured;
    not_yet += specs[i].support == OptionSupport::kNotYet;
    no_effect += specs[i].support == OptionSupport::kNoEffect;
    // Every option has Paddle's default (and type), the no-effect ones too.
    no_default += !specs[i].default_value.has_value();
    EXPECT_EQ(IpuOptions::FindSpec(specs[i].name), &specs[i]);
  }
  // + accumulation, batches per step, reduction, replication, num_ipus, manual shard,
  // pipelining, pipeline_schedule, trace_path, auto_recomputation,
  // location_optimizer's use_replicated_tensor_sharding and its threshold, device_profile
  // + need_avg_shard, anchor_return_type and _period, enable_fp16, half_dtype, loss_scaling,
  // dynamic_loss_scaling and its four settings, automatic_loss_scaling_settings' four,
  // gradient_statistics, accl1..3_type, enable_stochastic_rounding, stages_per_device,
  // auto_split_cost, pipeline_in_flight, enable_distribution,
  // enable_distributed_replicated_graphs, global_replication_factor, global_replica_offset,
  // all_reduce_bucket_bytes, overlap_all_reduce, processes_per_replica, shard_embedding_rows,
  // block_sparse_weights
  // + compilation_progress_total, is_dynamic, lr, synthetic_data_mode, max_weight_norm
  EXPECT_EQ(honoured, 59);
  // enable_half_partial, mean_accumulation_and_replication_reduction_strategy,
  // weight_decay_mode
  EXPECT_EQ(not_yet, 3);
  // + location_optimizer's on_chip, min_elements_for_off_chip, use_io_tiles_*, and the
  // rest of PopART's session options in Paddle's registry
  // + accumulate_outer_fragment, replicated_collectives_settings,
  // create_implicit_pipelining_fwd_only_program and the model runtime's
  // enable_model_runtime_executor, num_buffers, timeout_ms, tiles_per_ipu
  EXPECT_EQ(no_effect, 89);
  EXPECT_EQ(no_default, 0) << "the maps, lists and location_* dicts are typed too";
  EXPECT_EQ(IpuOptions::FindSpec("nope"), nullptr);
}

// Every name of Paddle's IpuStrategy option registry
// (paddle/fluid/platform/device/ipu/ipu_strategy.cc, Paddle 2.x) is known:
// an unmodified script's set_options never fails on a name Paddle took.
TEST(IpuOptionsTest, EveryNameOfPaddlesRegistryIsKnown) {
  const char* paddle_names[] = {"is_training",
                                "need_avg_shard",
                                "enable_fp16",
                                "transfer_cast_op",
                                "use_no_bias_optimizer",
                                "enable_distribution",
                                "num_ipus",
                                "batches_per_step",
                                "micro_batch_size",
                                "random_seed",
                                "available_memory_proportion",
                                "loss_scaling",
                                "max_weight_norm",
                                "accl1_type",
                                "accl2_type",
                                "accl3_type",
                                "onnx_dump_path",
                                "weight_decay_mode",
                                "runtime_options.enable_eval",
                                "autodiff_settings.stitch_strategy",
                                "batch_serialization_settings.transform_context",
                                "batch_serialization_settings.method",
                                "batch_serialization_settings.batch_schedule",
                                "auto_recomputation",
                                "merge_var_update",
                                "virtual_graph_mode",
                                "synthetic_data_mode",
                                "subgraph_copying_strategy",
                                "accumulation_and_replication_reduction_type",
                                "mean_accumulation_and_replication_reduction_strategy",
                                "log_dir",
                                "cache_path",
                                "partials_type_matmuls",
                                "custom_codelet_compile_flags",
                                "serialized_poprithms_shift_graphs_dir",
                                "kahn_tie_breaker",
                                "execution_phase_settings.phases",
                                "execution_phase_settings.stages",
                                "batch_serialization_settings.factor",
                                "first_dot_op",
                                "final_dot_op",
                                "num_io_tiles",
                                "merge_var_update_mem_threshold",
                                "loose_threshold_at_peak",
                                "replicated_graph_count",
                                "accumulation_factor",
                                "swap_limit_scheduler",
                                "global_replication_factor",
                                "global_replica_offset",
                                "accumulate_outer_fragment",
                                "replicated_collectives_settings",
                                "create_implicit_pipelining_fwd_only_program",
                                "enable_model_runtime_executor",
                                "num_buffers",
                                "timeout_ms",
                                "tiles_per_ipu",
                                "is_dynamic",
                                "lr",
                                "scaled_optimizer_state",
                                "default_prefetch_buffering_depth",
                                "compilation_progress_total",
                                "transitive_closure_optimization_threshold",
                                "batch_serialization_settings.concat_on_virtual_graph_change",
                                "batch_serialization_settings.concat_on_execution_phase_change",
                                "batch_serialization_settings.concat_on_pipeline_stage_change",
                                "strict_op_versions",
                                "opx_alias_checking",
                                "opx_modify_checking",
                                "dot_op_names",
                                "export_poplar_computation_graph",
                                "export_poplar_vertex_graph",
                                "separate_call_op_pdfs",
                                "enable_outlining",
                                "enable_outlining_copy_cost_pruning",
                                "rearrange_anchors_on_host",
                                "enable_prefetch_datastreams",
                                "enable_non_stable_softmax",
                                "enable_replicated_graphs",
                                "enable_gradient_accumulation",
                                "instrument_with_hardware_cycle_counter",
                                "enable_pipelining",
                                "disable_grad_accumulation_tensor_streams",
                                "compile_engine",
                                "constant_weights",
                                "enable_engine_caching",
                                "enable_merge_exchange",
                                "enable_floating_point_checks",
                                "enable_stochastic_rounding",
                                "explicit_recomputation",
                                "enable_explicit_main_loops",
                                "use_host_copy_ops",
                                "alias_zero_copy",
                                "delay_var_updates",
                                "enable_fully_connected_pass",
                                "enable_serialized_matmuls",
                                "enable_stable_norm",
                                "decompose_grad_sum",
                                "enable_distributed_replicated_graphs",
                                "group_host_sync",
                                "automatic_loss_scaling_settings.enabled",
                                "enable_supported_data_type_casting",
                                "group_norm_strided_channel_grouping",
                                "schedule_non_weight_update_gradient_consumers_early",
                                "outline_sequence_break_cost",
                                "outline_threshold",
                                "time_limit_scheduler",
                                "automatic_loss_scaling_settings.bin_edge_location",
                                "automatic_loss_scaling_settings.threshold_upper_count_proportion",
                                "custom_ops",
                                "enable_manual_shard",
                                "enable_half_partial",
                                "dot_checks",
                                "hardware_instrumentations",
                                "custom_codelets",
                                "engine_options",
                                "report_options",
                                "convolution_options",
                                "lstm_options",
                                "gcl_options",
                                "location_activation",
                                "location_weight",
                                "location_optimizer",
                                "location_accumulator"};
  std::string unknown;
  std::set<std::string> paddle(std::begin(paddle_names), std::end(paddle_names));
  for (const char* name : paddle_names) {
    const OptionSpec* spec = IpuOptions::FindSpec(name);
    if (!spec) unknown += std::string(" ") + name;
    EXPECT_TRUE(!spec || !spec->tiller_own) << name << " is Paddle's, not Tiller's own";
  }
  EXPECT_EQ(unknown, "");
  // The rest are Tiller's own, or keys of Paddle's location_optimizer dict.
  for (const OptionSpec& spec : IpuOptions::Specs()) {
    if (paddle.count(spec.name) || spec.name.starts_with("location_optimizer.")) continue;
    EXPECT_TRUE(spec.tiller_own) << spec.name
                                 << " is in neither Paddle's registry nor Tiller's own";
  }
}

TEST(IpuOptionsTest, ValuesReadLikePythonsRepr) {
  EXPECT_EQ(OptionValueRepr(OptionValue(true)), "True");
  EXPECT_EQ(OptionValueRepr(OptionValue(int64_t{-3})), "-3");
  EXPECT_EQ(OptionValueRepr(OptionValue(1.0)), "1.0");
  EXPECT_EQ(OptionValueRepr(OptionValue(0.1)), "0.1");
  EXPECT_EQ(OptionValueRepr(OptionValue(1e-5)), "1e-05");
  EXPECT_EQ(OptionValueRepr(OptionValue(std::string("it's"))), "\"it's\"");
  EXPECT_EQ(OptionValueRepr(OptionValue(std::string("a'\""))), "'a\\'\"'");
}

}  // namespace
