// Which persistable variables of a Paddle training program are parameters,
// running statistics, optimizer state or the learning rate, and which of
// paddle.static.save's two files (.pdparams / .pdopt) each one goes to.
// The public entry point is tiller::checkpoint::PaddleStateRoles
// (include/tiller/checkpoint.h); the rule is documented in state_roles.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontend/paddle/program.h"

namespace tiller::paddle {

// What a persistable variable is for (the public API mirrors these:
// tiller::checkpoint::StateRole / SaveFile).
enum class StateRole { kParameter, kStatistic, kOptimizerState, kLearningRate, kOther };
enum class SaveFile { kPdparams, kPdopt, kNone };

struct StateVariable {
  std::string name;
  StateRole role = StateRole::kOther;
  SaveFile file = SaveFile::kNone;
};

// The file paddle.static.save 3.3 writes `var` to, by the rule of the
// program's form.
SaveFile PaddleSaveFile(const Program& program, const VarInfo& var);

// Every variable that is persistable (in Paddle's sense: not a feed/fetch
// list or reader) or that paddle.static.save writes, sorted by name.
std::vector<StateVariable> ClassifyState(const Program& program);

// The optimizer accumulators Paddle's IPU strategy types with accl1_type /
// accl2_type / accl3_type (what its backend handed PopART): Adam, AdamW and
// Lamb: Moment1 -> 1, Moment2 (and Moment2Max) -> 2; Adamax: Moment -> 1,
// InfNorm -> 2; Adagrad: Moment -> 1; Adadelta: AvgSquaredGrad -> 1,
// AvgSquaredUpdate -> 2; RMSProp: MeanSquare -> 1, MeanGrad -> 2, Moment ->
// 3. SGD and Momentum state is not typed by them (the original's SGD took
// no accumulator types). Variable name -> 1, 2 or 3.
std::map<std::string, int> OptimizerAccumulators(const Program& program);

}  // namespace tiller::paddle
