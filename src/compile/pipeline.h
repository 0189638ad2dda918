// Pipelined execution: the micro-batches of an accumulation window flow
// through a step whose ops sit on several devices (pipeline stages), and
// the devices work on different micro-batches at the same time.
//
//   device 0:  F0 F1 F2 B0 F3 B1 .. B3        (1F1B: a backward as soon as
//   device 1:     F0 B0 F1 B1 F2 B2 F3 B3      one is ready, so at most
//                                              `stages` + 1 micro-batches in
//                                              flight: PipelineCopies)
//
// Each micro-batch in flight needs its own activations: the runner takes K
// executables compiled from the same graph onto the same devices (its
// "copies"), sharing the state (weights, gradient accumulators), and runs
// micro-batch i on copy i % K; K bounds the micro-batches in flight, so the
// activations stashed between a micro-batch's forward and backward are those
// of at most K micro-batches. A micro-batch's segments (runs of steps on one
// device in one phase: Executable::segments) run on their device's stream
// in program order, one after another (the memory plans assume that order);
// each device takes, among the segments ready on it, backward before forward
// (1F1B) or forward before backward (fill-drain), the lowest micro-batch
// first, so every device sees the micro-batches of a phase in order and
// gradient accumulators add them in the same order as a sequential run.
//
// The update phase is not run here: after the window, run it once
// (Executable::Run(RunPart::kUpdateOnly)) on the copy of the last micro-batch.
// Except with updates_in_pipeline (PopART's "continuous" pipelining: training
// without gradient accumulation): every micro-batch's update segments run
// in the pipeline right after its backward on each device, so later
// micro-batches' forward passes read weights some updates old, as on the
// IPU. Which updates a forward sees then depends on each device's order of
// work, so that order is fixed before the run, as PopART's pipeline cycles
// fix it (StaticOrder): the same for every run, the IPU's staleness. Such a
// window needs ContinuousCopies copies.
#pragma once

#include <functional>
#include <vector>

#include "compile/executable.h"

namespace tiller::compile {

enum class PipelineSchedule {
  kOneForwardOneBackward,  // 1F1B: backward first; in flight <= copies
  kFillDrain,              // every forward, then every backward (GPipe)
};

struct PipelineStats {
  int micro_batches = 0;
  int max_in_flight = 0;        // micro-batches started and not finished, at most
  std::vector<double> busy_ms;  // per device: time running segments
  double wall_ms = 0;
  // The share of device time spent idle: 1 - sum(busy) / (devices x wall).
  double BubbleFraction() const;
};

// The pipeline stages of a compiled step: the distinct PipelineOrder of its
// forward ops (copies and views, which the compiler places, aside).
int PipelineStages(const ir::Graph& g);

// The copies (micro-batches in flight) a runner needs: fill-drain the whole
// window; 1F1B `in_flight` when positive, else one per pipeline stage (or
// per device when there are fewer stages than devices: several stages on a
// device, as the interleaved split gives, need a micro-batch each in flight
// to keep every device busy) plus one. The one more lets the first stage run
// a forward ahead while its first backward comes back through the pipeline:
// with exactly one per stage it idles for the later stages' backward of the
// first micro-batch (a quarter of the idle time of a 2-stage BERT window).
// Never more than the window.
int PipelineCopies(PipelineSchedule schedule, int window, int devices, int stages,
                   int in_flight = 0);

// The fewest micro-batches in flight that keep every device of a 1F1B
// pipeline working: one per stage, or per device.
int PipelineMinInFlight(int devices, int stages);

// The copies of a pipeline that updates inside it (continuous pipelining)
// over `devices` devices of one stage each: PopART's cycles keep 2 x
// devices - 1 micro-batches in flight (never more than the window).
int ContinuousCopies(int window, int devices);

class PipelineRunner {
 public:
  // copies: executables of the same graph on the same devices (same
  // segments). Checks that forward values flow to the same or a later
  // pipeline stage (ir::PipelineOrder): a forward op reading a value a later
  // stage computed fails with kInvalidArgument naming the op ("the stage
  // order runs backwards").
  PipelineRunner(std::vector<Executable*> copies, std::vector<backend::Device*> devices,
                 PipelineSchedule schedule, bool updates_in_pipeline = false);

  // Runs the forward and backward segments of micro-batches 0..n-1.
  // prepare(i, exe) runs on the calling thread before micro-batch i's first
  // segment (write its inputs into exe's input slots); finish(i, exe) after
  // its last (read the outputs). An error in a segment stops the window:
  // segments already running finish, nothing new starts, and the first
  // error is rethrown.
  using MicroBatchFn = std::function<void(int micro_batch, Executable& exe)>;
  PipelineStats Run(int n, const MicroBatchFn& prepare, const MicroBatchFn& finish);

  size_t copies() const { return copies_.size(); }

  // With updates_in_pipeline: each device's order of (micro-batch, segment
  // position) for a window of n, which Run follows: PopART's cycles (in
  // each, every device runs one micro-batch's forward, then one's backward
  // and update).
  using Order = std::vector<std::vector<std::pair<int, size_t>>>;
  Order StaticOrder(int n) const;

 private:
  // Whether `a` goes before `b` among the segments ready on a device.
  bool Better(const std::pair<int, size_t>& a, const std::pair<int, size_t>& b) const;

  std::vector<Executable*> copies_;
  std::vector<backend::Device*> devices_;
  PipelineSchedule schedule_;
  bool updates_in_pipeline_ = false;
  std::vector<size_t> segments_;  // the segments run per micro-batch, in order
};

}  // namespace tiller::compile
