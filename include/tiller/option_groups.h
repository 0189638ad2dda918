// Option groups that several option sets share, after PopART's
// SessionOptions and its *Settings structs: each group is declared and
// documented once here, held whole by every option set that has it (the
// training session's training::SessionOptions, the planner's
// planning::PlanRequest, the compiler's CompileOptions, the predictor's
// Config for its IPU settings), filled from Paddle's IpuStrategy options in
// one place (runtime/training_ipu_options.cc) and validated once, by its
// Validate(), which names the option. Checks that relate two groups (a
// pipeline's depth against the accumulation factor, loss scaling against
// several devices) stay with the option set that holds both
// (runtime/training_options_check.cc).
//
//   tiller::training::SessionOptions o;
//   o.split.stages_per_device = 2;
//   o.collectives.all_reduce_bucket_bytes = 8 << 20;
//   o.loss_scale.dynamic = true;
//   o.accumulation = {.enabled = true, .factor = 4};
//
// Adding an option to a group: a field here (its default and what it does),
// its Paddle / Tiller name in the IpuStrategy registry
// (runtime/ipu_option_specs.cc), its line in FromIpuOptions and, if it has
// limits, a check in the group's Validate().
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tiller {

// How data-parallel replicas exchange gradients and optimizer state.
struct CollectiveSettings {
  // Replicas sum their gradients in messages of at most this many bytes
  // (several gradients packed together: fewer, larger collectives; the sums
  // are the same); 0: one message per gradient (Tiller's option
  // all_reduce_bucket_bytes).
  int64_t all_reduce_bucket_bytes = int64_t{32} << 20;
  // Without gradient accumulation: each bucket's reduction starts in the
  // backward pass as soon as its gradients exist, on a second worker of the
  // device, and the update waits for it (the same sums; overlap_all_reduce).
  bool overlap_all_reduce = true;
  // Replicated tensor sharding of the optimizer state (Paddle's
  // location_optimizer {use_replicated_tensor_sharding: 1}, on by default
  // in Paddle's IpuStrategy; with replicas > 1): each replica keeps
  // 1 / replicas of every per-element optimizer state (Adam's moments,
  // momentum's velocity, ...) and updates its part of the weights; the
  // gradients are reduce-scattered and the weights all-gathered instead of
  // one all-reduce. Results are unchanged. Weights with fewer than
  // shard_min_elements elements (min_elements_for_replicated_tensor_sharding,
  // PopART's default 8192) and Lamb's state stay whole; a session's
  // GetState and checkpoints see whole tensors.
  bool shard_optimizer_state = false;
  int64_t shard_min_elements = 8192;
  // Sparse embedding tables split by rows over the replicas (Tiller's
  // option shard_embedding_rows; with replicas > 1): each replica keeps
  // 1 / replicas of the rows of every table that only sparse lookups
  // (is_sparse / sparse=True) read, and of its row optimizer's state; a
  // lookup gathers every replica's ids and reduce-scatters the rows found,
  // the row update keeps the gathered rows of its part
  // (passes/shard_embedding_rows.cc). Results are unchanged; a session's
  // GetState and checkpoints see whole tables.
  bool shard_embedding_rows = false;

  // Throws tiller::Error (kInvalidArgument) naming the option out of range.
  void Validate() const;
};

// How a program is split into pipeline stages when nobody sharded it, or
// when need_avg_shard asks for the split anyway.
struct StageSplitSettings {
  // Split the forward ops into stages of about equal cost, one per device
  // (a program without ipu_index on several devices).
  bool auto_split = false;
  // need_avg_shard (with enable_manual_shard): split even a program whose
  // ops carry ipu_index, replacing it (Paddle split evenly by op count;
  // Tiller balances the cost). Implies auto_split.
  bool sharded = false;
  // Stages per device (Tiller's option stages_per_device, with pipelining
  // and need_avg_shard): 2 splits the program into 2 x devices stages, stage
  // s on device s mod devices (interleaved 1F1B: the pipeline fills and
  // drains in half the time).
  int stages_per_device = 1;
  // Balance measured costs (Tiller's option auto_split_cost = measured: the
  // step's ops timed on one device at compile time, after the compile's
  // rewrites) instead of the flops-and-bytes estimate. Deterministic within
  // a process, not across processes.
  bool measured = false;

  // Whether a split runs at all.
  bool enabled() const { return auto_split || sharded; }
  // Throws tiller::Error (kInvalidArgument) naming the option out of range.
  void Validate() const;
};

// Gradient accumulation: the micro-batches whose gradients one update
// applies, and how they combine.
struct AccumulationSettings {
  // enable_gradient_accumulation; a factor above 1 needs it on.
  bool enabled = false;
  // accumulation_factor: micro-batches per update.
  int factor = 1;
  // accumulation_and_replication_reduction_type: how the gradients of
  // factor x replicas micro-batches combine: their mean (Paddle's default;
  // the update sees the gradient of the mean loss over the micro-batches)
  // or sum.
  enum class Reduction { kSum = 0, kMean = 1 } reduction = Reduction::kMean;

  // Micro-batches per update.
  int steps() const { return enabled ? factor : 1; }
  // Throws tiller::Error (kInvalidArgument) naming the option out of range.
  void Validate() const;
};

// Pipelined execution of a program sharded over several devices: the
// micro-batches of each update (of an eval run) flow through the devices,
// which work on different micro-batches at once.
struct PipelineSettings {
  // enable_pipelining (Paddle Inference: ipu_enable_pipelining).
  bool enabled = false;
  // Pipelined training without gradient accumulation, as PopART ran it
  // (enable_pipelining without enable_gradient_accumulation): a run's
  // batches_per_step micro-batches flow through the pipeline and each is
  // its own update, applied on each device right after its backward there,
  // so later micro-batches' forward passes read weights not yet updated by
  // the ones before ("stale weights"; not the sequential SGD an
  // accumulated pipeline computes). batches_per_step must be at least the
  // stages. Each device's order of work is fixed before the run
  // (compile/pipeline.h), so runs repeat bit for bit. Refused with dynamic /
  // automatic loss scaling, gradient statistics and a trained weight read
  // on more than one device.
  bool continuous = false;
  // The order each device takes ready work in (Tiller's option
  // pipeline_schedule): 1F1B (backward first; at most in_flight
  // micro-batches in flight, so their stashed activations) or fill-drain
  // (every forward, then every backward; all the window's micro-batches in
  // flight).
  enum class Schedule { kOneFOneB, kFillDrain } schedule = Schedule::kOneFOneB;
  // 1F1B's micro-batches in flight per replica (Tiller's option
  // pipeline_in_flight; each stashes its activations until its backward):
  // 0 picks one more than the stages, so that the first stage runs a
  // forward ahead while its first backward comes back (a shorter fill); the
  // stages keep the stash at 1F1B's minimum. Never fewer than the stages.
  int in_flight = 0;

  // Throws tiller::Error (kInvalidArgument) for settings that contradict
  // each other or are out of range.
  void Validate() const;
};

// Recomputation (auto_recomputation 1, 3 or 4): backward ops read forward
// activations recomputed from their pipeline stage's inputs, so the
// activations do not live from the forward pass to their gradient (lower
// peak memory, more compute). Results are unchanged.
struct RecomputeSettings {
  bool enabled = false;
  // Keep only the stage inputs (auto_recomputation 3 pipeline, 4 all: the
  // backward runs the stage's forward again, matmuls included); else matmul
  // / conv outputs as well (1, standard).
  bool all = false;

  // From Paddle's auto_recomputation mode (popart::RecomputationType):
  // 0 none, 1 standard, 3 pipeline, 4 all; throws tiller::Error
  // (kInvalidArgument) for 2 (norm only, not implemented) and other values.
  static RecomputeSettings FromAutoRecomputation(int64_t mode);
};

// Mixed precision and the storage of the optimizer state.
struct PrecisionSettings {
  // The IPU option enable_fp16 with Tiller's half_dtype (Paddle Inference:
  // Config::SetPrecision / ipu_enable_fp16): "float32", "bfloat16",
  // "float16" or "half" (bfloat16 where the CPU multiplies it, else
  // float16): the type matmul / linear / conv2d, forward and backward,
  // multiply in, with float32 accumulation; weights (the master copies),
  // gradients, their accumulators and the optimizer stay float32.
  std::string compute = "float32";
  // Storage of the optimizer accumulators (the IPU options accl1_type,
  // accl2_type, accl3_type: "FLOAT" or "FLOAT16"; which state each one
  // types: paddle::OptimizerAccumulators). FLOAT16 keeps that state in
  // float16 (half its memory): the update reads it widened to float32 and
  // stores its result rounded to nearest float16. State reads, writes and
  // checkpoints still exchange float32, as the program declares it.
  std::array<std::string, 3> accl_types = {"FLOAT", "FLOAT", "FLOAT"};
  // Stochastic rounding (the IPU option enable_stochastic_rounding): every
  // rounding of a float32 value to a half type in the training step (the
  // operands half precision multiplies, float16 accumulators) rounds up or
  // down at random in proportion to the distance, unbiased on average. The
  // draws follow the session's random_seed and the step number: a run
  // repeats bit for bit.
  bool stochastic_rounding = false;

  // Throws tiller::Error (kInvalidArgument) for a precision or accumulator
  // type that is not one of the names above; `option` names the setting in
  // the message (Paddle's "precision", "Config::SetPrecision").
  void Validate(const std::string& option = "precision") const;
};

// Checks a precision name as PrecisionSettings::Validate does; the one place
// that spells the accepted names.
void ValidatePrecisionName(const std::string& name, const std::string& option);

// Loss scaling and the gradient statistics that steer it (training with half
// precision).
struct LossScalingSettings {
  // Static loss scaling (the IPU option loss_scaling): the backward pass
  // starts from this instead of 1 and the gradients are divided by it before
  // the update (with the mean over micro-batches, in the same scale), so
  // gradients too small for float16 survive its rounding. Power-of-two
  // scales leave float32 results bit for bit unchanged. With dynamic or
  // automatic scaling: the initial scale.
  double scale = 1.0;
  // Dynamic loss scaling (Tiller's option dynamic_loss_scaling, with Paddle
  // AMP's rule and defaults for static programs): an update whose gradients
  // hold a NaN or Inf is skipped (parameters and optimizer state untouched)
  // and after decr_every_n_nan_or_inf such updates in a row the scale is
  // multiplied by decr_ratio (not below 1); after incr_every_n_steps clean
  // updates in a row it is multiplied by incr_ratio (if that stays finite).
  bool dynamic = false;
  int incr_every_n_steps = 1000;
  int decr_every_n_nan_or_inf = 2;
  double incr_ratio = 2.0;
  double decr_ratio = 0.8;
  // Gradient statistics (Tiller's option gradient_statistics; with half
  // precision): per update, the backward values rounded to the half type
  // are counted - elements it flushes to zero, elements below the bin edge
  // (bin_edge_location x the half type's largest value) and at or above it
  // - summed over micro-batches and replicas (the compiler's accumulator
  // kGradientHistogram; the session's LastGradientStatistics).
  bool gradient_statistics = false;
  // Automatic loss scaling (the IPU option
  // automatic_loss_scaling_settings.enabled, Graphcore's rule; implies
  // gradient_statistics): every update_period updates, the scale halves
  // when more than threshold_upper_count_proportion of the counted elements
  // lie at or above the edge, and doubles otherwise. An update with
  // non-finite gradients is skipped and halves it, as with dynamic loss
  // scaling.
  bool automatic = false;
  double bin_edge_location = 0.0625;
  double threshold_upper_count_proportion = 1e-7;
  int update_period = 1;

  // The scale changes from update to update (dynamic or automatic): the
  // compiled step reads it as a state the runtime sets before each update,
  // and the runtime decides which updates to skip.
  bool steers() const { return dynamic || automatic; }
  // The step counts the gradient statistics.
  bool counts_gradients() const { return gradient_statistics || automatic; }
  // Throws tiller::Error (kInvalidArgument) for settings that contradict
  // each other or are out of range.
  void Validate() const;
};

}  // namespace tiller
