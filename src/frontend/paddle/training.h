// Compiling a Paddle training program (forward + loss + optimizer.minimize).
//
// Paddle writes its own backward ops into the program; Tiller drops them and
// differentiates the forward graph itself (passes/autodiff). The program is
// split in three parts:
//   forward   ops before the loss-gradient seed: translated as for inference
//             (with training semantics: dropout masks, batch statistics);
//   backward  Paddle's gradient ops: dropped;
//   update    everything after them that reads gradients or state: gradient
//             clipping, regularization, optimizer ops. Translated with
//             Paddle's gradient variables bound to Tiller's gradients.
// Persistable variables (parameters, optimizer moments, learning rate,
// running statistics) become graph state; a persistable name that an op
// rebinds (ParamOut written to Param's name) becomes a state update.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/paddle/program.h"
#include "ir/graph.h"

namespace tiller::paddle {

struct TrainingProgramInfo {
  std::string loss;            // the variable the program minimizes
  double loss_grad_seed = 1;   // Paddle's initial d(loss) (1 unless the loss is scaled)
  size_t seed_op = 0;          // index of the op that seeds the backward part
  std::vector<bool> backward;  // per op: Paddle's backward (dropped)
  // Gradient variables read by the update part -> the forward variable they
  // are the gradient of.
  std::map<std::string, std::string> grad_of;
  std::vector<std::string> trained;  // forward variables whose gradients are used, first use order
  std::vector<std::string> state;    // persistable variables (program.param_names)
  // The update part checks the gradients itself (Paddle AMP's
  // check_finite_and_unscale): a non-finite gradient is the program's to
  // handle (it skips the update), not an error.
  std::string checks_finite_op;  // that op, described; empty if none
};

// Finds the loss, Paddle's backward ops and which gradient each update op
// reads. Fails (kInvalidArgument) naming the file when the program has no
// backward part or a gradient cannot be traced to a forward variable.
TrainingProgramInfo AnalyzeTrainingProgram(const Program& program);

struct TrainingGraphOptions {
  // Forward only, in test mode (dropout off, running statistics), no
  // gradients and no state updates: runtime_options.enable_eval.
  bool eval = false;
  uint64_t random_seed = 0;
  bool no_bias_optimizer = false;  // see TranslateContext::no_bias_optimizer()
  double max_weight_norm = 0;      // see TranslateContext::max_weight_norm()
};

// The compiled form of one training (or eval) step.
struct TrainingGraph {
  std::unique_ptr<ir::Graph> graph;
  ir::Value* loss = nullptr;
  // Gradient of each trained variable as the update part reads it (after
  // Paddle's loss seed, before clipping): a run checks them before any
  // update so a non-finite value never reaches the parameters.
  std::vector<std::pair<std::string, ir::Value*>> gradients;
};

// Translates a training step in the two halves around the backward pass,
// which the caller (the compile driver) builds in between, so the frontend
// never runs autodiff itself:
//   TrainingTranslation t(program, info, ...);
//   ir::Value* loss = t.Forward();   // feeds, state, forward ops, the loss
//   grads = d loss / d t.Trained()   // the driver, passes/autodiff
//   t.Update(grads);                 // Paddle's loss seed, clipping, regularization, optimizers
//   TrainingGraph step = t.Finish(); // fetches, state updates, dead code removed
// Feeds are graph inputs, every variable in info.state a graph state (types
// from `state_types`), fetches graph outputs, followed by one more output:
// the loss (kept so a run can check it). Unsupported op types of the forward
// and update parts are listed with counts at construction. In eval mode
// Update is not called: the step is the forward part in test mode.
class TrainingTranslation {
 public:
  TrainingTranslation(const Program& program, const TrainingProgramInfo& info,
                      const std::map<std::string, ir::TensorType>& state_types,
                      const std::vector<std::string>& feed_names,
                      const std::vector<ir::TensorType>& feed_types,
                      const std::vector<std::string>& fetch_names, ir::Graph::Folder folder,
                      const TrainingGraphOptions& options);
  ~TrainingTranslation();
  TrainingTranslation(const TrainingTranslation&) = delete;
  TrainingTranslation& operator=(const TrainingTranslation&) = delete;

  ir::Graph& graph();
  // Translates the forward part; returns the loss.
  ir::Value* Forward();
  // The variables whose gradients the update part reads (info.trained), as
  // values of the forward graph. Fails naming a non-float or missing one.
  std::vector<ir::Value*> Trained();
  // Translates the update part with gradients[k] = d loss / d Trained()[k].
  void Update(const std::vector<ir::Value*>& gradients);
  // The gradients as the update part reads them (after Paddle's loss seed).
  std::vector<ir::Value*> ReadGradients() const;
  TrainingGraph Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiller::paddle
