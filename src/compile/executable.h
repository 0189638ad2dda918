// A compiled graph for one device: the kernels in order, each bound to fixed
// addresses in one preallocated arena. Running it moves no memory besides
// what kernels write, and allocates nothing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/kernel.h"
#include "compile/memory_plan.h"
#include "ir/graph.h"

namespace tiller::compile {

struct CompileOptions {
  int num_threads = 1;
};

// Storage the caller owns for the graph's state values (ir::ValueKind::kState),
// by value name; each buffer holds exactly the state's bytes and outlives the
// executable.
using StateStorage = std::map<std::string, void*>;

struct TensorSlot {
  std::string name;
  ir::TensorType type;
  void* data = nullptr;  // inside the arena, or a constant's bytes for outputs
};

class Executable {
 public:
  // Takes ownership of the graph; builds kernels, plans memory and binds addresses.
  static std::unique_ptr<Executable> Build(std::unique_ptr<ir::Graph> graph,
                                           const CompileOptions& options,
                                           const StateStorage& states = {});

  // Runs every step. Inputs must have been written into inputs()[i].data.
  // State updates are in the states' storage when it returns.
  void Run();

  // Per-op-type wall time, accumulated over runs while profiling is on.
  struct ProfileEntry {
    std::string op_type;
    double total_ms = 0;
    int64_t calls = 0;
  };
  void EnableProfiling(bool on) { profiling_ = on; }
  // After every kernel, scans its floating-point outputs; the first NaN or
  // Inf stops the run with kNonFinite naming the op, the output and the
  // element (Paddle's FLAGS_check_nan_inf). Costs one read of every output.
  void EnableNanInfCheck(bool on) { check_nan_inf_ = on; }
  // Checks one value (e.g. the loss) right after the op producing it, even
  // with the full check off: a non-finite value stops the run there, before
  // later ops (optimizer updates) consume it. Returns the step position of
  // that op, or -1 when `v` is not produced by a kernel.
  // `label` names the value in the error ("the loss 'mean_0.tmp_0'").
  int GuardFinite(const ir::Value* v, const std::string& label);
  std::vector<ProfileEntry> Profile() const;  // sorted by total time, largest first

  std::vector<TensorSlot>& inputs() { return inputs_; }
  const std::vector<TensorSlot>& outputs() const { return outputs_; }
  const ir::Graph& graph() const { return *graph_; }
  const MemoryPlan& plan() const { return plan_; }
  size_t num_steps() const { return steps_.size(); }

 private:
  struct Step {
    const ir::Op* op;
    std::unique_ptr<backend::Kernel> kernel;  // null for views
    backend::KernelArgs args;
  };

  std::unique_ptr<ir::Graph> graph_;
  MemoryPlan plan_;
  AlignedBuffer arena_;
  std::vector<Step> steps_;
  struct Copy {
    const void* from;
    void* to;
    size_t bytes;
  };
  std::vector<Copy> copy_back_;  // state updates not written in place
  void CopyBack();
  std::vector<TensorSlot> inputs_, outputs_;
  int num_threads_ = 1;
  bool profiling_ = false;
  bool check_nan_inf_ = false;
  void CheckFinite(const Step& s, bool guarded_only) const;
  // (step, output) -> label of each guarded value; guarded_step_ flags the
  // steps that have one, so the run loop tests a bit rather than the map.
  std::map<std::pair<size_t, size_t>, std::string> guard_labels_;
  std::vector<bool> guarded_step_;
  std::vector<double> step_ms_;  // per step, while profiling
  int64_t profiled_runs_ = 0;
};

// Constant folding for Graph::set_folder: runs the CPU kernel of an op whose
// inputs are all constants and turns its outputs into constants.
void FoldWithCpuKernels(ir::Graph& g, ir::Op& op);

}  // namespace tiller::compile
