// The planner (`tiller plan`): what each device of a configuration holds and
// how long a step takes on a device profile, without running the model.
// It compiles one replica's step as Tiller would run it (placement, stages,
// replicated tensor sharding, accumulators, memory plans) but allocates no
// arena and runs nothing.
//
//   tiller::planning::PlanRequest r;
//   r.model = "bert_train.json"; r.train = true;
//   r.devices = 4; r.replicas = 2; r.micro_batch = 8;
//   r.accumulation = {.enabled = true, .factor = 4};
//   r.profile = "ipu-mk2";
//   std::cout << tiller::planning::Plan(r).text;
//
// Profiles: cpu (this machine, rates measured now), ipu-mk2, ipu-bow, h200;
// "NAME:CAPACITY" (e.g. "ipu-mk2:2GB") asks what-if about the capacity.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tiller/error.h"
#include "tiller/option_groups.h"

namespace tiller::planning {

struct PlanRequest {
  std::string model;   // training program (.json / .pdmodel) or inference model
  std::string params;  // inference: parameter file (default: derived from model)
  bool train = false;
  // Training: the variables fed each step (default: the program's data
  // variables).
  std::vector<std::string> feeds;
  // Feed shapes by name; other feeds' dynamic dims: the first is the
  // micro-batch, the second seq_len.
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t seq_len = 128;
  int devices = 1;  // all replicas' (Paddle's num_ipus)
  int replicas = 1;
  int micro_batch = 1;
  int batches_per_step = 1;  // updates (training) or micro-batches (inference) per run
  // Training: micro-batches per update (tiller/option_groups.h; the CLI's
  // --accumulate N and python's accumulate=N turn it on for N > 1).
  AccumulationSettings accumulation;
  // With more than one device per replica: pipelined (on by default, unlike
  // a session, since a plan over several devices is usually a pipeline's)
  // and its schedule.
  PipelineSettings pipeline{.enabled = true};
  // Pipelined: split.stages_per_device > 1 splits the program by cost into
  // stages_per_device x devices stages interleaved over the devices
  // (Tiller's option stages_per_device, replacing any ipu_index as
  // need_avg_shard does); 1: as the program says. The planner sets the
  // other fields from the request.
  StageSplitSettings split;
  // Replicated tensor sharding of the optimizer state (on by default, as in
  // Paddle's IpuStrategy) and the gradients' message size.
  CollectiveSettings collectives{.shard_optimizer_state = true};
  // Paddle's auto_recomputation (RecomputeSettings::FromAutoRecomputation).
  RecomputeSettings recompute;
  std::string profile = "cpu";
  int threads = 1;  // cpu profile: threads per device its rates are measured with
  // The half type the plan's weights, their half copies and the arenas
  // hold (precision.compute), and, training, which optimizer accumulators
  // it stores in float16 (precision.accl_types).
  PrecisionSettings precision;
  // Training across the processes of an MPI job (enable_distribution): this
  // many processes, each with `devices` devices and `replicas` replicas
  // (ranks x replicas in all), joined by a link of rank_link bytes/s and
  // rank_latency seconds per message step (0: the profile's link, no
  // latency). The gradients travel in messages of
  // collectives.all_reduce_bucket_bytes.
  int ranks = 1;
  double rank_link = 0, rank_latency = 0;
  // A cluster file (JSON) sets the above and the profile at once:
  //   {"name": "POD64", "profile": "ipu-mk2", "ranks": 4, "devices_per_rank": 16,
  //    "link": {"bandwidth_GBps": 25, "latency_us": 5}, "note": "..."}
  // (devices_per_rank replaces `devices`, keeping devices / replicas).
  std::string cluster;
};

struct DeviceMemory {
  size_t weights = 0, optimizer = 0, gradients = 0, other = 0;
  // Half precision, training: the per-run half copies of the float32
  // (master) weights, part of the arena.
  size_t half_weight_copies = 0;
  size_t stash = 0;  // per micro-batch
  size_t arena = 0;  // per micro-batch in flight
  int in_flight = 1;
  size_t peak = 0;
  double forward_seconds = 0, backward_seconds = 0, update_seconds = 0;
};

struct PlanReport {
  std::string text;                   // what `tiller plan` prints
  std::vector<DeviceMemory> devices;  // one replica's
  double window_seconds = 0;          // one update (training)
  double run_seconds = 0;             // one run
  double bubble = 0;
  // Of window_seconds: the replicas' collectives (training), and their
  // messages per update.
  double collective_seconds = 0;
  int collective_messages = 0;
  size_t profile_memory_bytes = 0;
  bool fits = true;
};

// Throws tiller::Error for a bad request (unknown profile, devices not a
// multiple of replicas, a program that does not compile).
PlanReport Plan(const PlanRequest& request);

}  // namespace tiller::planning
