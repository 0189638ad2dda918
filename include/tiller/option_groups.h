// Option groups that several option sets share, after PopART's
// SessionOptions and its *Settings structs: each group is declared and
// documented once here, held whole by every option set that has it (the
// training session's training::SessionOptions, the planner's
// planning::PlanRequest, the compiler's CompileOptions), filled from
// Paddle's IpuStrategy options in one place (runtime/training_ipu_options.cc)
// and validated once, by its Validate(), which names the option.
//
//   tiller::training::SessionOptions o;
//   o.split.stages_per_device = 2;
//   o.collectives.all_reduce_bucket_bytes = 8 << 20;
//
// Adding an option to a group: a field here (its default and what it does),
// its Paddle / Tiller name in the IpuStrategy registry
// (runtime/ipu_option_specs.cc), its line in FromIpuOptions and, if it has
// limits, a check in the group's Validate().
#pragma once

#include <cstdint>

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

}  // namespace tiller
