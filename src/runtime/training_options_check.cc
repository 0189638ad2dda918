// The checks of a training session's options (training_options_check.h).
#include "runtime/training_options_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/collective.h"
#include "core/error.h"
#include "runtime/distribution.h"
#include "runtime/replica_options.h"

namespace tiller::runtime {

namespace {

using training::SessionOptions;

// Distribution: the job's replicas and this process's first, checked
// against what the options say (Paddle's global_replication_factor and
// global_replica_offset, which IPU scripts compute from the launcher's
// environment).
void ResolveDistribution(training::SessionOptions& options, const std::string& program) {
  backend::ProcessGroup& job = MpiProcessGroup();
  const int replicas = std::max(options.replicas, 1);
  const int spread = options.processes_per_replica;
  // Stages on several processes: a replica per `spread` consecutive ranks.
  const int global = spread > 1 ? job.size() / spread : job.size() * replicas;
  const int offset = spread > 1 ? job.rank() / spread : job.rank() * replicas;
  std::string problem;
  if (spread > 1 && job.size() % spread != 0) {
    problem = fmt::format(
        "processes_per_replica {} does not divide the job's {} process(es): each replica "
        "takes that many; launch mpirun -np with a multiple of {}",
        spread, job.size(), spread);
  } else if (spread > 1 && replicas > 1) {
    problem = fmt::format(
        "processes_per_replica {} with replicated_graph_count {}: local replicas of a replica "
        "spread over processes are not supported yet",
        spread, replicas);
  } else if (spread > 1 && options.devices_per_replica % spread != 0) {
    problem = fmt::format(
        "processes_per_replica {} does not divide the replica's {} devices (num_ipus): each "
        "process runs the same number of them",
        spread, options.devices_per_replica);
  } else if (spread > 1 && options.global_replicas > 0 && options.global_replicas != global) {
    problem = fmt::format(
        "global_replication_factor {} but the job's {} processes run {} replica(s) of "
        "processes_per_replica {} processes each",
        options.global_replicas, job.size(), global, spread);
  } else if (spread > 1 && options.global_replica_offset >= 0 &&
             options.global_replica_offset != offset) {
    problem = fmt::format(
        "global_replica_offset {} but this process is rank {} of {}, in replica rank / "
        "processes_per_replica = {}",
        options.global_replica_offset, job.rank(), job.size(), offset);
  } else if (options.global_replicas > 0 && options.global_replicas != global) {
    problem = fmt::format(
        "global_replication_factor {} but the job has {} process(es) x {} replica(s) "
        "(replicated_graph_count) = {}: launch with mpirun -np {} or change the options",
        options.global_replicas, job.size(), replicas, global,
        options.global_replicas % replicas == 0 ? options.global_replicas / replicas : -1);
  } else if (options.global_replica_offset >= 0 && options.global_replica_offset != offset) {
    problem = fmt::format(
        "global_replica_offset {} but this process is rank {} of {}, whose first replica is "
        "rank x replicated_graph_count = {}",
        options.global_replica_offset, job.rank(), job.size(), offset);
  }
  // Every process learns whether any refused: all fail together, none waits
  // in a collective for a process that gave up.
  const int first = job.Min(problem.empty() ? job.size() : job.rank());
  if (!problem.empty()) Fail(ErrorKind::kInvalidArgument, "{}: {}", program, problem);
  if (first < job.size())
    Fail(ErrorKind::kInvalidArgument,
         "{}: rank {} of the job refused its distribution options (its message says why)", program,
         first);
  options.global_replicas = global;
  options.global_replica_offset = offset;
}

}  // namespace

void ResolveSessionOptions(SessionOptions& options, const std::string& program_path) {
  if (options.processes_per_replica < 1)
    Fail(ErrorKind::kInvalidArgument, "processes_per_replica must be >= 1, got {}",
         options.processes_per_replica);
  if (options.processes_per_replica > 1) {
    if (!options.distribution)
      Fail(ErrorKind::kInvalidArgument,
           "processes_per_replica {} spreads a replica's devices over the processes of an MPI "
           "job: it needs enable_distribution (and mpirun -np {})",
           options.processes_per_replica, options.processes_per_replica);
    if (options.loss_scale.steers() || options.loss_scale.gradient_statistics)
      Fail(ErrorKind::kUnimplemented,
           "processes_per_replica {}: dynamic / automatic loss scaling and gradient statistics "
           "decide from every stage's gradients, which sit on different processes; not "
           "supported yet",
           options.processes_per_replica);
    if (options.split.measured)
      Fail(ErrorKind::kUnimplemented,
           "processes_per_replica {}: the split by measured costs (auto_split_cost = measured) "
           "can differ between processes, whose steps must be the same; use the estimated "
           "costs or ipu_shard_guard",
           options.processes_per_replica);
  }
  if (options.distribution) ResolveDistribution(options, program_path);
  if (options.processes_per_replica > 1 && options.global_replicas > 1 &&
      options.collectives.shard_optimizer_state)
    Fail(ErrorKind::kUnimplemented,
         "processes_per_replica {}: replicated tensor sharding of the optimizer state over "
         "replicas whose stages are on several processes is not supported yet (set "
         "location_optimizer.use_replicated_tensor_sharding False)",
         options.processes_per_replica);
  // Each replica's lookups exchange rows with the counterpart of the same
  // device in every replica: one device per replica until a table's lookups
  // and its update are known to share a device.
  if (options.collectives.shard_embedding_rows && options.devices_per_replica > 1)
    Fail(ErrorKind::kUnimplemented,
         "shard_embedding_rows with {} devices per replica is not supported yet (one device "
         "per replica: set num_ipus to the replica count)",
         options.devices_per_replica);
  options.accumulation.Validate();
  if (options.batches_per_step < 1)
    Fail(ErrorKind::kInvalidArgument, "batches_per_step must be >= 1, got {}",
         options.batches_per_step);
  if (options.replicas < 1)
    Fail(ErrorKind::kInvalidArgument, "replicas must be >= 1, got {}", options.replicas);
  if (options.micro_batch_size < 0)
    Fail(ErrorKind::kInvalidArgument,
         "micro_batch_size must be >= 1 (0: taken from the feeds), got {}",
         options.micro_batch_size);
  if (options.anchor == SessionOptions::Anchor::kEveryN &&
      (options.anchor_period < 1 || options.batches_per_step % options.anchor_period != 0))
    Fail(ErrorKind::kInvalidArgument,
         "anchor_return_period {} does not divide batches_per_step {} (every_n returns every "
         "that many batches of a run)",
         options.anchor_period, options.batches_per_step);
  if (options.replicas > 1 && !options.replicated_graphs)
    Fail(ErrorKind::kInvalidArgument,
         "replicated_graph_count {} needs replication on (enable_replicated_graphs=True)",
         options.replicas);
  if (options.devices_per_replica < 1)
    Fail(ErrorKind::kInvalidArgument, "devices per replica must be >= 1, got {}",
         options.devices_per_replica);
  if (options.pipeline.continuous) {
    if (!options.pipeline.enabled || options.accumulation.enabled ||
        options.accumulation.factor > 1)
      Fail(ErrorKind::kInvalidArgument,
           "continuous pipelining needs pipelining without gradient accumulation");
    if (options.batches_per_step < options.devices_per_replica)
      Fail(ErrorKind::kInvalidArgument,
           "continuous pipelining: batches_per_step {} is less than the {} pipeline stages",
           options.batches_per_step, options.devices_per_replica);
    if (options.pipeline.schedule != PipelineSettings::Schedule::kOneFOneB ||
        options.pipeline.in_flight > 0 || options.split.stages_per_device > 1)
      Fail(ErrorKind::kInvalidArgument,
           "pipelined training without gradient accumulation runs PopART's schedule (each "
           "device one forward and one backward per cycle): pipeline_schedule, "
           "pipeline_in_flight and stages_per_device do not apply to it");
    if (options.processes_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "pipelined training without gradient accumulation with stages on several processes "
           "(processes_per_replica {}) is not supported yet; enable_gradient_accumulation",
           options.processes_per_replica);
    if (options.loss_scale.steers() || options.loss_scale.gradient_statistics)
      Fail(ErrorKind::kUnimplemented,
           "pipelined training without gradient accumulation updates inside the pipeline: "
           "dynamic / automatic loss scaling and gradient statistics decide per accumulated "
           "update (PopART refused them too); enable_gradient_accumulation");
  }
  if (options.pipeline.enabled && options.devices_per_replica < 2)
    Fail(ErrorKind::kInvalidArgument,
         "pipelining needs the program sharded over more than one device per replica "
         "(enable_manual_shard, num_ipus = replicas x stages)");
  options.pipeline.Validate();
  options.split.Validate();
  options.collectives.Validate();
  options.precision.Validate();
  if (options.split.stages_per_device > 1 && !(options.pipeline.enabled && options.split.enabled()))
    Fail(ErrorKind::kInvalidArgument,
         "stages_per_device {} interleaves the stages of Tiller's split by cost over a "
         "pipeline's devices: it needs enable_pipelining and need_avg_shard; a program sharded "
         "by ipu_shard_guard alone interleaves through its own ipu_stage",
         options.split.stages_per_device);
  // Each device (devices_per_replica per replica) gets its share of the
  // threads; with fewer threads than devices, one each, taking turns on the
  // cores (ReplicaCompileOptions notes it).
  if (options.num_threads < 1)
    Fail(ErrorKind::kInvalidArgument, "num_threads must be >= 1, got {}", options.num_threads);
}

void CheckLossScalingOptions(const SessionOptions& options, const paddle::TrainingProgramInfo& info,
                             const std::string& program_path) {
  options.loss_scale.Validate();
  if (!info.checks_finite_op.empty()) {
    // Paddle AMP's loss-scaling ops are in the program: they scale the loss,
    // check the gradients and skip updates themselves.
    if (options.loss_scale.steers() || options.loss_scale.scale != 1.0)
      Fail(ErrorKind::kInvalidArgument,
           "{}: the program scales its loss itself ({}, from paddle.static.amp.decorate): "
           "Tiller's loss_scaling / dynamic_loss_scaling / automatic_loss_scaling_settings would "
           "scale it again; leave them off",
           program_path, info.checks_finite_op);
    // The check reads every gradient: on several devices per replica, or
    // with each replica updating its own shard, it would see only part.
    if (options.devices_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "{}: the program's own gradient check ({}) needs every gradient on one device; "
           "{} devices per replica are not supported with it yet",
           program_path, info.checks_finite_op, options.devices_per_replica);
    if (options.replicas > 1 && options.collectives.shard_optimizer_state)
      Fail(ErrorKind::kUnimplemented,
           "{}: the program's own gradient check ({}) needs every gradient on each replica; "
           "replicated tensor sharding of the optimizer state is not supported with it yet "
           "(set location_optimizer.use_replicated_tensor_sharding False)",
           program_path, info.checks_finite_op);
  }
  if (options.loss_scale.steers()) {
    // Without pipelining the update's own check decides, which needs the
    // update on one device and whole gradients on every replica; a pipeline
    // checks its window's accumulators before any stage updates.
    if (!options.pipeline.enabled && options.devices_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "dynamic / automatic loss scaling over several devices per replica needs pipelining "
           "(enable_pipelining) for now");
    if (!options.pipeline.enabled && options.replicas > 1 &&
        options.collectives.shard_optimizer_state)
      Fail(ErrorKind::kUnimplemented,
           "dynamic / automatic loss scaling with replicated tensor sharding of the optimizer "
           "state needs pipelining for now (or set "
           "location_optimizer.use_replicated_tensor_sharding False)");
  }
}

}  // namespace tiller::runtime
