// What a compilation is asked to do: on which devices, with how many
// replicas, micro-batches and which precision. One struct for inference and
// training; the runtime fills it from Paddle's option names
// (runtime/ipu_options.h) or from Config.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tiller/option_groups.h"

namespace tiller::backend {
class Collective;
class ProcessGroup;
struct DeviceOptions;
}  // namespace tiller::backend

namespace tiller::compile {

struct DeviceSpec {
  std::string backend = "cpu";  // a registered backend (backend/backend.h)
  int threads = 1;              // its execution threads (CPU: OpenMP team size)
  size_t memory_bytes = 0;      // 0: the backend's default
  // Shrink the team while other processes compete for the CPUs
  // (backend::DeviceOptions::adapt_to_contention).
  bool adapt_to_contention = false;
  // The backend's hardware unit (backend::DeviceOptions::unit): "1" of
  // "cuda:1"; "": its default.
  std::string unit = {};
  // backend::DeviceOptions::keep_warm_ms.
  int keep_warm_ms = 0;
};

// What a backend is asked to create for `spec` (Backend::CreateDevice).
backend::DeviceOptions DeviceOptionsOf(const DeviceSpec& spec);

// How ops are assigned to devices (compile/placement.h).
enum class PlacementPolicy {
  // Each op runs on the device of its shard (Paddle's ipu_index); with one
  // device every shard runs there.
  kByShard,
  // Each op runs on the first device, in list order, whose backend has a
  // kernel for it (a partial backend takes what it can, the rest falls back).
  kFirstSupported,
};

enum class Precision { kFloat32, kFloat16, kBFloat16 };

struct CompileOptions {
  // The devices, in preference order for kFirstSupported and by shard for
  // kByShard. The first host-accessible one is the host: graph inputs,
  // outputs and state live there.
  std::vector<DeviceSpec> devices = std::vector<DeviceSpec>(1);
  PlacementPolicy placement = PlacementPolicy::kByShard;
  // With kByShard and more than one device: a forward graph nobody sharded
  // (no ipu_index), or any with split.sharded (need_avg_shard), is split into
  // stages of about equal cost (passes/auto_split.cc; the split is in the
  // compile report; tiller/option_groups.h says what each setting does).
  StageSplitSettings split;
  bool optimize = true;  // run the optimization passes (Config::SwitchIrOptim)
  // Inference with optimize: 3 x 3 float32 convolutions of stride 1 use
  // Winograd's algorithm (backends/cpu/passes/conv_winograd.cc), results within float32
  // rounding of the direct kernels' (Config::SwitchWinograd).
  bool conv_winograd = true;
  // Inference with optimize: NHWC convolution chains move to channels in
  // blocks of 8 (backends/cpu/passes/blocked_convs.cc) when this is 8; -1: when every
  // device's conv_channel_block() is 8 (AVX2 CPUs without AVX-512); 0: never.
  int conv_channel_block = -1;
  // Compile for the memory plans only (the planner): no arenas, no
  // accumulator or shard storage; the executable cannot run.
  bool plan_only = false;
  // Called as a compilation goes, with (done, progress_total): 0 as it
  // starts, progress_total when the executable is built, and in between as
  // its stages end (Paddle's compilation_progress_logger).
  std::function<void(int done, int total)> progress;
  int progress_total = 100;

  // The IPU execution model. Pipelining is not a compile option: a
  // pipeline runs several compiled copies of a sharded step
  // (compile/pipeline.h).
  int replicas = 1;
  // With replicas > 1: per device, the group of that device's counterparts
  // in every replica (the same shard of each), which sums the gradients
  // computed on it; and this step's rank in the groups. The compiler puts
  // its devices in their groups, and an all_reduce per gradient before the
  // update. One compiled step per replica, run concurrently (the runtime's
  // job).
  std::vector<backend::Collective*> replica_groups;
  int replica_rank = 0;
  // Pipeline stages on different processes of an MPI job (Tiller's option
  // processes_per_replica): the job rank running each device
  // (device_process[d]; empty: this process runs every device), this
  // process's rank, and the link the values crossing between them travel
  // on. Every process compiles the whole step; each keeps its own devices'
  // ops and turns the copies to and from the others' devices into
  // send / recv (compile/processes.h). The other processes' devices are
  // placeholders (no ops; the host device's arena still holds the feeds).
  std::vector<int> device_process;
  int process = 0;
  backend::ProcessGroup* process_link = nullptr;
  // With replicas > 1: gradient buckets (passes/bucket_all_reduce.cc),
  // their overlap with the backward pass, and replicated tensor sharding of
  // the optimizer state (passes/shard_optimizer_state.cc; the sharded
  // states' storage comes from Compile's ShardStorage). Described in
  // tiller/option_groups.h.
  CollectiveSettings collectives;
  // Micro-batches whose gradients one update applies (accumulation.steps())
  // and how they combine with the replicas' (accumulation.reduction;
  // tiller/option_groups.h): the driver adds a gradient accumulator per
  // trained value (backward phase) and the update reads the accumulated
  // gradient; Executable::Run(RunPart::kBeforeUpdate) runs a micro-batch
  // without the update. Batches per step are the runtime's loop and do not
  // change the compiled step.
  AccumulationSettings accumulation;
  int batches_per_step = 1;
  // A pipeline running every micro-batch's update inside it (continuous
  // pipelining, compile/pipeline.h): each device's update ops follow its
  // backward ops (OrderByDevice), so a stage updates as its backward ends.
  bool updates_in_pipeline = false;
  // Mixed precision (passes/mixed_precision.cc): matmul, linear and conv2d
  // multiply in the half type with float32 accumulation. The runtime
  // resolves PrecisionSettings::compute ("half": by the CPU) into this.
  Precision precision = Precision::kFloat32;
  // Loss scaling (training; tiller/option_groups.h). The compiler reads
  // scale (the backward pass starts from it instead of 1, and the gradients
  // are divided by it again before the update, with the mean over
  // micro-batches in the same scale), steers() (the scale is a state the
  // caller sets before each update, CompiledStep::SetLossScale; the runtime
  // decides which updates to skip: the session from the guards of the
  // gradients the update reads, a pipeline from its accumulators) and
  // counts_gradients() (per update window, the gradient elements the half
  // type rounds to zero, and those below and at or above the bin edge,
  // bin_edge_location x the half type's largest value, are counted into the
  // accumulator kGradientHistogram: passes/gradient_statistics.cc).
  LossScalingSettings loss_scale;
  // Training: every rounding to a half type is stochastic
  // (passes/stochastic_rounding.cc), drawn from this seed and the step.
  bool stochastic_rounding = false;
  // Training: weights whose products run on their nonzero blocks
  // (passes/block_sparse_weights.cc; SessionOptions::block_sparse_weights).
  std::vector<std::string> block_sparse_weights;
  uint64_t stochastic_rounding_seed = 0;
  // Training: backward ops read forward activations recomputed from their
  // pipeline stage's inputs (passes/recompute.cc), so activations do not
  // live from the forward pass to their gradient; recompute.all keeps only
  // stage inputs, else matmul / conv outputs too.
  RecomputeSettings recompute;

  // A single CPU device with `threads` threads.
  static CompileOptions Cpu(int threads) {
    CompileOptions o;
    o.devices[0].threads = threads;
    return o;
  }
};

// Throws kInvalidArgument for a bad value (no devices, threads < 1) and
// kUnimplemented, naming the option, for one that would change results and
// is not implemented yet.
void Validate(const CompileOptions& options);

}  // namespace tiller::compile
