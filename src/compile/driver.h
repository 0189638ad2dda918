// The compile driver: the one path from a frontend's graph to an executable,
// for inference, training and gradient queries alike.
//
//   source.BuildForward (frontend: translate, forward phase)
//     -> autodiff (backward phase; when the source names a loss)
//     -> source.BuildUpdate (frontend: clipping, regularization, optimizers)
//     -> source.Finish (outputs, state updates)
//     -> optimization passes (passes/pass.h), each verified
//     -> placement + copies (compile/placement.h), verified
//     -> memory plan per device + kernels per device (compile/executable.h)
// Every stage after translation is recorded in a CompileReport, which
// `tiller info --passes` prints.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compile/executable.h"
#include "compile/options.h"
#include "core/aligned_buffer.h"
#include "passes/pass.h"

namespace tiller::compile {

// What the driver needs from a frontend for one step (the runtime adapts
// the Paddle frontend to it). The graph belongs to the source until Finish.
class StepSource {
 public:
  struct Forward {
    ir::Graph* graph = nullptr;
    ir::Value* loss = nullptr;    // set: the driver differentiates it
    std::vector<ir::Value*> wrt;  // the values whose gradients BuildUpdate takes
  };
  virtual ~StepSource() = default;
  // Builds inputs, state and the forward ops, folding constants with `folder`.
  virtual Forward BuildForward(ir::Graph::Folder folder) = 0;
  // Given d loss / d wrt[k] (same order), adds what consumes the gradients.
  // Returns the gradients as the update reads them (a source may rescale
  // them), which a training session checks for NaN/Inf before any update.
  virtual std::vector<ir::Value*> BuildUpdate(const std::vector<ir::Value*>& gradients) {
    return gradients;
  }
  // Adds outputs and state updates; hands over the graph.
  virtual std::unique_ptr<ir::Graph> Finish() = 0;
};

// "add x2, relu x1": op types and their counts, as reports print them.
std::string FormatOpCounts(const std::map<std::string, int>& counts);

struct CompileReport {
  std::vector<passes::PassRecord> stages;  // autodiff, passes, placement, copies, in order
  // The rewrite and placement pipelines as this compile ran them: the
  // passes whose condition held, in order (PassPipeline::Describe), whether
  // or not they found something to rewrite; `tiller passes` lists the rest.
  std::string pipeline;
  std::vector<std::string> devices;  // "cpu:0 (2 threads)"
  size_t arena_bytes = 0;            // all devices
  // One line per stage: name, rewrites, ops before -> after, types added/removed.
  std::string Format() const;
};

// A gradient accumulator the driver added (CompileOptions::accumulation_steps):
// a state of the step that the step owns, zeroed between updates. Storage
// given to Compile under the accumulator's name is used instead (executables
// that accumulate together), and `data` is then left empty.
struct Accumulator {
  std::string name;
  AlignedBuffer data;
};

// Storage for a state the step keeps only a part of
// (CompileOptions::shard_optimizer_state): called once per sharded state;
// returns a buffer of the part's bytes holding the part's current value,
// which the caller keeps alive as long as the executable.
using ShardStorage = std::function<void*(const passes::ShardedState&)>;

// Names of the dynamic loss scale's states (CompiledStep::SetLossScale).
inline constexpr const char* kLossScaleSeed = "@LOSS_SCALE@SEED";
inline constexpr const char* kLossScaleUnscale = "@LOSS_SCALE@UNSCALE";
// The accumulators of CompileOptions::gradient_statistics, float64 [3]: this
// name, then "<name>@1", ... one per shard.
inline constexpr const char* kGradientHistogram = "@GRADIENT_HISTOGRAM";
// Whether `a` holds gradient statistics (float64 counts), not a gradient.
inline bool IsGradientHistogram(const Accumulator& a) {
  return a.name.rfind(kGradientHistogram, 0) == 0;
}

struct CompiledStep {
  // Declared before exe: the executable binds the accumulators' storage.
  std::vector<Accumulator> accumulators;
  // The states this replica's step holds a part of (their storage came
  // from the ShardStorage).
  std::vector<passes::ShardedState> sharded_states;
  std::unique_ptr<Executable> exe;
  const ir::Value* loss = nullptr;          // in exe->graph(), when differentiated
  std::vector<const ir::Value*> gradients;  // d loss / d wrt, as BuildUpdate got them
  // With replicas: this replica's own (accumulated) gradients, before they
  // are summed over the replicas.
  std::vector<const ir::Value*> replica_gradients;
  CompileReport report;
  // Stages on other processes (CompileOptions::device_process): the values
  // crossing processes in one micro-batch's step, over the whole job, and
  // the rank updating each state (compile/processes.h).
  int transfers = 0;
  std::map<std::string, int> state_owner;
  // Dynamic loss scaling: the states holding the backward pass's seed (the
  // scale) and the factor the update multiplies the gradients by (the mean
  // over micro-batches and replicas divided by the scale); SetLossScale
  // writes both.
  AlignedBuffer loss_scale_seed, loss_scale_unscale;
  double gradient_mean = 1.0;
  void SetLossScale(double scale);
  // CompileOptions::gradient_statistics: the window's counts so far
  // (flushed to zero, below the edge, at or above it) summed over the
  // shards' accumulators; false when the step keeps none.
  bool GradientHistogram(double counts[3]) const;

  // Zeroes the gradient accumulators: after each update, and after a run
  // that failed part way through an accumulation window.
  void ResetAccumulators();
};

// For each trained value wrt[k], a state `<name>@GRAD@ACCUMULATED` and
// `acc = accumulate(acc, gradients[k])` (placed with the gradient, backward
// phase, written in place; `embedding_grad_add` where the gradient is an
// embedding's table gradient). A gradient summed from contributions of
// several shards gets an accumulator per shard (`...@ACCUMULATED@<i>`
// after the first), each on its shard, and the update adds them; returns
// the sums, which the update reads. The accumulators are appended
// to `accumulators`, with zeroed storage when `allocate`.
std::vector<ir::Value*> AddGradientAccumulators(ir::Graph& g, const std::vector<ir::Value*>& wrt,
                                                const std::vector<ir::Value*>& gradients,
                                                std::vector<Accumulator>* accumulators,
                                                bool allocate = true);

class Compiler {
 public:
  // Validates the options and creates the devices (which the executables
  // it compiles use: the compiler must outlive them). The first
  // host-accessible device is the host: graph inputs, outputs and state
  // live there, and constants are folded on it.
  explicit Compiler(CompileOptions options);
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  const CompileOptions& options() const { return options_; }
  const std::vector<backend::Device*>& devices() const { return devices_; }
  // Constant folding on the host device (compile/fold.h).
  ir::Graph::Folder folder();

  // `shards` must be given when the options shard the optimizer state.
  CompiledStep Compile(StepSource& source, const StateStorage& states = {},
                       const ShardStorage& shards = {});

 private:
  CompileOptions options_;
  std::vector<std::unique_ptr<backend::Device>> owned_;
  std::vector<backend::Device*> devices_;
  int host_ = 0;
};

}  // namespace tiller::compile
