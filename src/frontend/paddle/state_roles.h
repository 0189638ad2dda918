// Which persistable variables of a Paddle training program are parameters,
// running statistics, optimizer state or the learning rate, and which of
// paddle.static.save's two files (.pdparams / .pdopt) each one goes to.
// The public entry point is tiller::checkpoint::PaddleStateRoles
// (include/tiller/checkpoint.h); the rule is documented in state_roles.cc.
#pragma once

#include <vector>

#include <string>

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

}  // namespace tiller::paddle
