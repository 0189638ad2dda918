// A training session's options from IpuOptions (training_ipu_options.h).
#include "runtime/training_ipu_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace tiller::runtime {

using training::IpuOptions;
using training::SessionOptions;

SessionOptions FromIpuOptions(const IpuOptions& o) {
  SessionOptions out;
  out.num_threads = o.NumThreads();
  out.random_seed = static_cast<uint64_t>(o.GetInt("random_seed"));
  out.check_nan_inf = o.GetBool("enable_floating_point_checks");
  out.no_bias_optimizer = o.GetBool("use_no_bias_optimizer");
  out.max_weight_norm = o.GetDouble("max_weight_norm");
  out.loss_scale.scale = o.GetDouble("loss_scaling");
  out.loss_scale.dynamic = o.GetBool("dynamic_loss_scaling");
  out.loss_scale.incr_every_n_steps =
      static_cast<int>(o.GetInt("dynamic_loss_scaling_settings.incr_every_n_steps"));
  out.loss_scale.decr_every_n_nan_or_inf =
      static_cast<int>(o.GetInt("dynamic_loss_scaling_settings.decr_every_n_nan_or_inf"));
  out.loss_scale.incr_ratio = o.GetDouble("dynamic_loss_scaling_settings.incr_ratio");
  out.loss_scale.decr_ratio = o.GetDouble("dynamic_loss_scaling_settings.decr_ratio");
  out.loss_scale.gradient_statistics = o.GetBool("gradient_statistics");
  out.loss_scale.automatic = o.GetBool("automatic_loss_scaling_settings.enabled");
  out.loss_scale.bin_edge_location =
      o.GetDouble("automatic_loss_scaling_settings.bin_edge_location");
  out.loss_scale.threshold_upper_count_proportion =
      o.GetDouble("automatic_loss_scaling_settings.threshold_upper_count_proportion");
  out.loss_scale.update_period =
      static_cast<int>(o.GetInt("automatic_loss_scaling_settings.update_period"));
  for (int k = 0; k < 3; ++k)
    out.precision.accl_types[k] = o.GetStr(fmt::format("accl{}_type", k + 1));
  out.precision.stochastic_rounding = o.GetBool("enable_stochastic_rounding");
  if (o.GetBool("enable_fp16")) {
    const std::string half = o.GetStr("half_dtype");
    out.precision.compute = half == "auto" ? "half" : half;
  }
  out.micro_batch_size = o.GetInt("micro_batch_size");
  out.synthetic_data_mode =
      static_cast<SessionOptions::SyntheticData>(o.GetInt("synthetic_data_mode"));
  out.compile_progress = o.CompilationProgressLogger();
  out.compile_progress_total = static_cast<int>(o.GetInt("compilation_progress_total"));
  out.accumulation.enabled = o.GetBool("enable_gradient_accumulation");
  out.accumulation.factor = static_cast<int>(o.GetInt("accumulation_factor"));
  out.batches_per_step = static_cast<int>(o.GetInt("batches_per_step"));
  // popart::ReductionType: only Mean (1) averages; Sum (0) and NoReduction
  // (2) sum.
  out.accumulation.reduction = o.GetInt("accumulation_and_replication_reduction_type") == 1
                                   ? AccumulationSettings::Reduction::kMean
                                   : AccumulationSettings::Reduction::kSum;
  out.replicated_graphs = o.GetBool("enable_replicated_graphs");
  out.replicas = static_cast<int>(o.GetInt("replicated_graph_count"));
  // num_ipus counts the devices of every replica (Paddle's rule).
  const int64_t devices = o.GetInt("num_ipus");
  const int64_t replicas = out.replicated_graphs ? out.replicas : 1;
  if (devices % replicas != 0)
    Fail(ErrorKind::kInvalidArgument,
         "num_ipus {} is not a multiple of replicated_graph_count {} (num_ipus counts the devices "
         "of every replica)",
         devices, replicas);
  const bool manual_shard = o.GetBool("enable_manual_shard");
  // More devices than replicas without manual sharding: an automatic split.
  out.split.auto_split = devices / replicas > 1 && !manual_shard;
  // need_avg_shard: the split replaces the program's ipu_index.
  out.split.sharded = manual_shard && o.GetBool("need_avg_shard");
  out.split.stages_per_device = static_cast<int>(o.GetInt("stages_per_device"));
  out.split.measured = o.GetStr("auto_split_cost") == "measured";
  if (manual_shard && devices / replicas < 2)
    Fail(ErrorKind::kInvalidArgument,
         "enable_manual_shard needs more than one device per replica: num_ipus {} with {} "
         "replica(s)",
         devices, replicas);
  out.devices_per_replica = static_cast<int>(devices / replicas);
  out.pipeline.enabled = o.GetBool("enable_pipelining");
  // Pipelined training without gradient accumulation: PopART's continuous
  // pipelining, each micro-batch its own update inside the pipeline.
  out.pipeline.continuous = out.pipeline.enabled && !out.accumulation.enabled && !o.EvalOnly();
  out.trace_path = o.GetStr("trace_path");
  out.recompute = RecomputeSettings::FromAutoRecomputation(o.GetInt("auto_recomputation"));
  out.collectives.shard_optimizer_state =
      o.GetBool("location_optimizer.use_replicated_tensor_sharding");
  out.distribution = o.GetBool("enable_distribution");
  if (out.distribution) {
    out.global_replicas = static_cast<int>(o.GetInt("global_replication_factor"));
    out.global_replica_offset = static_cast<int>(o.GetInt("global_replica_offset"));
  }
  out.collectives.shard_min_elements =
      o.GetInt("location_optimizer.min_elements_for_replicated_tensor_sharding");
  out.device_profile = o.GetStr("device_profile");
  std::istringstream sparse_names(o.GetStr("block_sparse_weights"));
  for (std::string name; std::getline(sparse_names, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) out.block_sparse_weights.push_back(name);
  }
  const std::string anchor = o.GetStr("anchor_return_type");
  out.anchor = anchor == "final"     ? SessionOptions::Anchor::kFinal
               : anchor == "every_n" ? SessionOptions::Anchor::kEveryN
               : anchor == "sum"     ? SessionOptions::Anchor::kSum
                                     : SessionOptions::Anchor::kAll;
  out.anchor_period = static_cast<int>(o.GetInt("anchor_return_period"));
  out.pipeline.schedule = o.GetStr("pipeline_schedule") == "fill_drain"
                              ? PipelineSettings::Schedule::kFillDrain
                              : PipelineSettings::Schedule::kOneFOneB;
  out.pipeline.in_flight = static_cast<int>(o.GetInt("pipeline_in_flight"));
  out.collectives.all_reduce_bucket_bytes = o.GetInt("all_reduce_bucket_bytes");
  out.processes_per_replica = static_cast<int>(o.GetInt("processes_per_replica"));
  out.collectives.overlap_all_reduce = o.GetBool("overlap_all_reduce");
  out.collectives.shard_embedding_rows = o.GetBool("shard_embedding_rows");
  // The pipeline's depth (PopART's rule): each update's micro-batches, or
  // without accumulation the run's, must fill the stages.
  if (out.pipeline.enabled && !o.EvalOnly() && out.accumulation.enabled &&
      out.accumulation.factor < out.devices_per_replica)
    Fail(ErrorKind::kInvalidArgument,
         "accumulation_factor {} is less than the {} pipeline stages: every update needs at least "
         "one micro-batch per stage (set_pipelining_config(enable_gradient_accumulation=True, "
         "accumulation_factor=N) with N >= {})",
         out.accumulation.factor, out.devices_per_replica, out.devices_per_replica);
  if (out.pipeline.continuous && out.batches_per_step < out.devices_per_replica)
    Fail(ErrorKind::kInvalidArgument,
         "pipelined training without gradient accumulation runs each micro-batch as its own "
         "update inside the pipeline (PopART's continuous pipelining), so a run's micro-batches "
         "must fill it: batches_per_step {} is less than the {} pipeline stages (set "
         "batches_per_step >= {}, or enable_gradient_accumulation with accumulation_factor >= "
         "{})",
         out.batches_per_step, out.devices_per_replica, out.devices_per_replica,
         out.devices_per_replica);
  // num_threads 0 (the default: every hardware thread) still gives each
  // device a thread: a script written for more IPUs than this machine has
  // cores runs, its devices sharing the cores. A number below the devices
  // gives each one thread too (ReplicaCompileOptions says so once).
  if (o.GetInt("num_threads") == 0)
    out.num_threads =
        std::max(out.num_threads, static_cast<int>(replicas) * out.devices_per_replica);
  return out;
}

}  // namespace tiller::runtime
