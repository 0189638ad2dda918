// A compiled graph: per device, kernels bound to fixed addresses in that
// device's preallocated arena, run as segments (runs of consecutive steps
// on one device) on the device's stream. Running it moves no memory besides
// what kernels and copy steps write, and allocates nothing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/kernel.h"
#include "compile/memory_plan.h"
#include "compile/options.h"
#include "ir/graph.h"

namespace tiller::compile {

class TraceRecorder;

// Storage the caller owns for the graph's state values (ir::ValueKind::kState),
// by value name; each buffer holds exactly the state's bytes and outlives the
// executable.
using StateStorage = std::map<std::string, void*>;

struct TensorSlot {
  std::string name;
  ir::TensorType type;
  void* data = nullptr;  // host memory: in the host device's arena, or a constant's bytes
};

class Executable {
 public:
  // Takes ownership of a placed graph (every op has a device, copies
  // inserted: compile/placement.h) and builds it for `devices`, which must
  // outlive the executable: creates each op's kernel on its device, plans
  // one arena per device and binds addresses.
  // With `plan_only`, it stops after the memory plans (kernels are created
  // for their workspace sizes): no arena is allocated and no address bound,
  // so states need no storage; plan() and graph() answer, Run refuses
  // (the planner, compile/plan.h).
  static std::unique_ptr<Executable> BuildPlaced(std::unique_ptr<ir::Graph> graph,
                                                 const std::vector<backend::Device*>& devices,
                                                 const StateStorage& states = {},
                                                 bool plan_only = false);
  // For tests and tools: creates the devices of `options` (owned by the
  // executable), places the graph by its policy, inserts copies and builds.
  static std::unique_ptr<Executable> Build(std::unique_ptr<ir::Graph> graph,
                                           const CompileOptions& options,
                                           const StateStorage& states = {});
  ~Executable();

  // Which steps Run runs: all, or all but the update phase (a micro-batch of
  // an accumulation window before its last: forward and backward only, the
  // state updates of those phases, such as gradient accumulators, applied).
  enum class RunPart { kAll, kBeforeUpdate, kUpdateOnly };
  // Runs the steps of `part`, one device at a time, each with the threads
  // of the executable's idle devices too (see lent_threads_). Inputs must
  // have been written into inputs()[i].data. State updates are in the states' storage when it
  // returns. Outputs computed by update ops are not written by kBeforeUpdate.
  void Run(RunPart part = RunPart::kAll);

  // Per-op-type wall time, accumulated over runs while profiling is on.
  struct ProfileEntry {
    std::string op_type;
    double total_ms = 0;
    int64_t calls = 0;
  };
  void EnableProfiling(bool on) {
    profiling_ = on;
    if (on) step_ms_.resize(steps_.size(), 0.0);
  }
  // After every kernel, scans its floating-point outputs; the first NaN or
  // Inf stops the run with kNonFinite naming the op, the output and the
  // element (Paddle's FLAGS_check_nan_inf). Costs one read of every output.
  // Outputs on devices that are not host-accessible are not scanned.
  void EnableNanInfCheck(bool on) { check_nan_inf_ = on; }
  // Checks one value (e.g. the loss) right after the op producing it, even
  // with the full check off: a non-finite value stops the run there, before
  // later ops (optimizer updates) consume it. A view (reshape) is checked
  // where its source is written. Returns the step position of that op, or
  // -1 when `v` is not produced by a kernel.
  // `label` names the value in the error ("the loss 'mean_0.tmp_0'").
  int GuardFinite(const ir::Value* v, const std::string& label);
  // Sorted by total time, largest first. by_shape: one entry per op type and
  // input shapes ("matmul [1024, 768] [768, 3072]"), where the time goes
  // inside a type (Paddle's profiler calls it op detail).
  std::vector<ProfileEntry> Profile(bool by_shape = false) const;
  // Per step while profiling: the op it runs and its mean wall time per run
  // (ms; 0 for views, and for every step before a profiled run).
  struct StepTime {
    const ir::Op* op;
    double ms;
  };
  std::vector<StepTime> StepTimes() const;
  // Records each segment run (on lane `lane_prefix` + device name), and each
  // copy and all_reduce (lanes `lane_prefix` copies / collectives), into
  // `trace` (compile/trace.h; nullptr: off). The tag (a micro-batch) names
  // the events of the runs that follow.
  void SetTrace(TraceRecorder* trace, const std::string& lane_prefix);
  void SetTraceTag(std::string tag) { trace_tag_ = std::move(tag); }

  // The steps in segments: runs of consecutive steps on one device and in
  // one phase. A pipeline (compile/pipeline.h) runs segments of several
  // micro-batches at once, each micro-batch's in program order.
  struct SegmentInfo {
    int device;
    ir::Phase phase;
  };
  const std::vector<SegmentInfo>& segments() const { return segment_info_; }
  // Runs segment j's steps on the calling thread, which must be its
  // device's stream (Stream::Submit), then copies back the state updates
  // its steps produced and the memory planner could not write in place
  // (batch-norm running statistics; an update segment's weights, when a
  // pipeline runs updates per micro-batch): the next micro-batch's segment
  // on the device reads them updated.
  void RunSegmentHere(size_t j);

  // Pipeline stages on other processes (compile/processes.h): the link the
  // step's send and recv ops use, and the round (a micro-batch's index in
  // its window) that tags their messages; every process runs the same
  // micro-batch with the same round. A pipeline sets it before each
  // micro-batch; without one, the runs of a step follow each other and
  // messages of the same tag arrive in order.
  void SetProcessLink(backend::ProcessGroup* link) { link_ = link; }
  // Which devices lend their threads to the one working in Run (all, by
  // default: idle CPU devices of this process). The placeholders of devices
  // on other processes have none to lend.
  void SetLenders(const std::vector<bool>& lends);
  backend::ProcessGroup* process_link() const { return link_; }
  void SetMessageRound(int64_t round) { round_ = round; }
  // Whether every message segment j begins by receiving has arrived (a
  // segment receives only at its start: a recv begins a segment), so that
  // running it does not wait on another process.
  bool SegmentArrived(size_t j) const;

  std::vector<TensorSlot>& inputs() { return inputs_; }
  const std::vector<TensorSlot>& outputs() const { return outputs_; }
  const ir::Graph& graph() const { return *graph_; }
  // The memory plan of the host device, or of `device`.
  const MemoryPlan& plan() const { return plans_.at(host_); }
  const MemoryPlan& plan(size_t device) const { return plans_.at(device); }
  bool plan_only() const { return plan_only_; }
  // The device `d` of the executable (names in reports).
  const backend::Device& device(size_t d) const { return *devices_.at(d); }
  // Bytes of the arena allocated on device `d` (0 when plan_only).
  size_t arena_allocated(size_t d) const {
    return d < arenas_.size() && arenas_[d] ? arenas_[d]->size() : 0;
  }
  int host_device() const { return host_; }
  size_t num_devices() const { return devices_.size(); }
  size_t num_steps() const { return steps_.size(); }
  // Total arena bytes over all devices.
  size_t arena_bytes() const;

 private:
  struct Step {
    const ir::Op* op;
    int device = 0;
    std::unique_ptr<backend::Kernel> kernel;  // null for views and copies
    bool copy = false;
    bool send = false, recv = false;  // messages to / from another process
    backend::KernelArgs args;
    // args.index_fault's storage (atomics do not move with the vector).
    std::unique_ptr<backend::IndexFault> index_fault;
  };
  // Consecutive steps on one device, submitted to its stream as one item.
  struct Segment {
    int device;
    size_t begin, end;
  };
  // Whether `part` leaves out work of the update phase (update) or of the
  // other phases (!update). Segments hold one phase each (views, which run
  // nothing, join any), so a run skips whole segments and copy-backs.
  static bool LeavesOut(RunPart part, bool update) {
    return update ? part == RunPart::kBeforeUpdate : part == RunPart::kUpdateOnly;
  }
  struct Copy {
    const void* from;
    void* to;
    size_t bytes;
    bool update;     // written by an update-phase op
    size_t segment;  // of the op writing it
  };

  void RunSegment(const Segment& seg);
  void RunStep(size_t i);
  void CopyBack(RunPart part);
  void CheckFinite(const Step& s, bool guarded_only) const;

  std::vector<std::unique_ptr<backend::Device>> owned_devices_;  // Build(options) only
  std::vector<backend::Device*> devices_;
  int host_ = 0;
  std::unique_ptr<ir::Graph> graph_;
  std::vector<MemoryPlan> plans_;  // per device
  bool plan_only_ = false;
  std::vector<std::unique_ptr<backend::Buffer>> arenas_;  // per device
  // Weights and constants uploaded to devices that are not host-accessible.
  std::vector<std::unique_ptr<backend::Buffer>> uploads_;
  std::vector<Step> steps_;
  std::vector<Segment> segments_;
  // Per device: the threads a segment of Run (which runs one device at a
  // time) may use: its own and those of the executable's other devices of
  // the same backend with host memory (CPU devices sharing the machine).
  // Pipelined runs (RunSegmentHere) keep each device to its own.
  std::vector<int> lent_threads_;
  std::vector<SegmentInfo> segment_info_;  // same order as segments_
  // Per segment: its leading recv steps (SegmentArrived).
  std::vector<std::vector<size_t>> segment_recvs_;
  backend::ProcessGroup* link_ = nullptr;
  int64_t round_ = 0;
  int64_t MessageTag(const Step& s) const;
  std::vector<Copy> copy_back_;  // state updates not written in place
  std::vector<TensorSlot> inputs_, outputs_;
  bool profiling_ = false;
  TraceRecorder* trace_ = nullptr;
  std::vector<int> trace_devices_;
  int trace_copies_ = 0, trace_collectives_ = 0;
  std::string trace_tag_;
  bool check_nan_inf_ = false;
  // (step, output) -> label of each guarded value; guarded_step_ flags the
  // steps that have one, so the run loop tests a bit rather than the map.
  std::map<std::pair<size_t, size_t>, std::string> guard_labels_;
  std::vector<bool> guarded_step_;
  std::vector<double> step_ms_;  // per step, while profiling
  int64_t profiled_runs_ = 0;
};

}  // namespace tiller::compile
