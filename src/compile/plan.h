// The planner: from one replica's compiled step (built with
// CompileOptions::plan_only, or a live one), what each device holds and
// how long a step takes on a device profile (compile/device_profile.h),
// without running the model.
//
// Memory per device = the state it holds (weights, optimizer state,
// gradient accumulators, other state such as running statistics and
// learning rates) + one arena (activations and workspace of a micro-batch,
// from the memory plan) per micro-batch in flight: a pipeline runs its
// micro-batches in copies of the step, each with its own arenas, so 1F1B
// holds min(accumulation, stages) of them and fill-drain the whole window.
// A state belongs to the device of the optimizer op that updates it, else
// of the first op that reads it; inference weights (constants) to every
// device that reads them.
//
// Tables streamed from host memory (the IPU's streaming memory): where a
// device does not fit, its embedding tables that only lookups read and row
// updates (sgd_rows, ...) write, largest first, with their optimizer state,
// are kept in the profile's host memory until it fits; each step moves the
// rows its lookups read in and the rows its updates touch in and out, over
// profile.host_link (priced into the forward and update). A plan fits when
// every device does and the streamed tables fit the host memory.
//
// Time: each op costs flops / profile.flops + bytes touched /
// profile.bandwidth; copies move bytes over profile.link; a collective of B
// bytes over R replicas costs a ring's steps: (R-1)/R x B / link + (R-1) x
// latency per reduce-scatter or all-gather, twice that per all-reduce (one
// message per op: bucket_all_reduce packs gradients). Replicas in several
// processes (ranks > 1) meet over the slower of the device link and the
// processes' link (PlanShape::rank_link, rank_latency). A window (one update) takes
//   not pipelined:  G x sum_d (f_d + b_d)                      + sum_d u_d
//   pipelined:      sum_d (f_d + b_d) + (G - 1) x max_d (f_d + b_d) + sum_d u_d
// (f, b: a micro-batch's forward and backward on device d; u: the update,
// which Tiller runs after the window, one device after another); the
// bubble is the share of device time idle in the window's forward and
// backward part.
#pragma once

#include <string>
#include <vector>

#include "compile/device_profile.h"
#include "compile/driver.h"

namespace tiller::compile {

struct PlanShape {
  bool training = true;
  int replicas = 1;
  int devices_per_replica = 1;
  int accumulation = 1;   // micro-batches per update (training)
  int micro_batches = 1;  // per run: batches_per_step x accumulation (inference: x any)
  bool pipelined = false;
  bool fill_drain = false;  // else 1F1B
  int in_flight = 0;        // 1F1B's micro-batches in flight (0: PipelineCopies' default)
  // The replicas above are all processes' (ranks x each process's); the
  // processes' link: bytes/s and seconds per message step.
  int ranks = 1;
  double rank_link = 0, rank_latency = 0;
};

struct DevicePlan {
  std::string device;    // "cpu:0"
  size_t weights = 0;    // trained values (training) or constants read (inference)
  size_t optimizer = 0;  // optimizer state (moments, beta powers)
  size_t gradients = 0;  // gradient accumulators
  size_t other = 0;      // other state: running statistics, learning rates
  size_t stash = 0;      // activations kept from forward to backward, per micro-batch
  size_t arena = 0;      // one micro-batch's activations + workspace (its memory plan)
  // Half precision: of the arena, the half copies of trained (master)
  // weights, and half-precision activations and gradients (bytes written per
  // micro-batch, before the memory plan reuses any).
  size_t half_weight_copies = 0, half_values = 0;
  int in_flight = 1;                     // micro-batches whose arenas it holds at once
  double flops = 0;                      // per micro-batch, forward + backward
  double forward_s = 0, backward_s = 0;  // per micro-batch
  double update_s = 0;                   // per update (collectives included)
  // Of update_s: the collectives (messages, bytes, seconds).
  int collective_messages = 0;
  size_t collective_bytes = 0;
  double collective_s = 0;
  // The largest states on the device (name, bytes), largest first, at most
  // three: what a plan that does not fit names.
  std::vector<std::pair<std::string, size_t>> largest;
  // Tables kept in host memory (not in the columns above): each table's
  // name and bytes with its optimizer state, largest first; the bytes in
  // all, and the rows moved between host and device per micro-batch
  // (lookups and, per update, row updates) and their seconds (in
  // forward_s and update_s).
  std::vector<std::pair<std::string, size_t>> streamed_tables;
  size_t streamed = 0;
  double streamed_bytes = 0, streamed_s = 0;
  size_t state() const { return weights + optimizer + gradients + other; }
  size_t peak() const { return state() + static_cast<size_t>(in_flight) * arena; }
};

struct StepPlan {
  DeviceProfile profile;
  PlanShape shape;
  std::vector<DevicePlan> devices;  // one replica's (replicas are alike)
  double window_s = 0;              // one update (training) or one run (inference)
  double run_s = 0;                 // one run: every window of it
  double bubble = 0;                // share of device time idle (forward / backward part)
  // The table the planner prints, and a line per device that does not fit.
  std::string Format() const;
  // The streamed tables of every replica of this process (each holds its
  // own), in the profile's host memory.
  size_t HostBytes() const;
  // Whether every device's peak is within the profile's memory, and the
  // streamed tables within its host memory.
  bool Fits() const;
  // Throws kInvalidArgument with Format() when a device does not fit.
  void CheckFits() const;
};

// State bytes per device of the step (weights, optimizer, gradients -- its
// accumulators --, other; the rest of each DevicePlan zero).
std::vector<DevicePlan> StateByDevice(const CompiledStep& step);

StepPlan PlanStep(const CompiledStep& step, const DeviceProfile& profile, const PlanShape& shape);

}  // namespace tiller::compile
