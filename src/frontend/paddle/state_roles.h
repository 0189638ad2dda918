// Which persistable variables of a Paddle training program are parameters,
// running statistics, optimizer state or the learning rate, and which of
// paddle.static.save's two files (.pdparams / .pdopt) each one goes to.
// The public entry point is tiller::checkpoint::PaddleStateRoles
// (include/tiller/checkpoint.h); the rule is documented in state_roles.cc.
#pragma once

#include <vector>

#include "frontend/paddle/program.h"
#include "tiller/checkpoint.h"

namespace tiller::paddle {

// The file paddle.static.save 3.3 writes `var` to, by the rule of the
// program's form.
checkpoint::SaveFile PaddleSaveFile(const Program& program, const VarInfo& var);

// Every variable that is persistable (in Paddle's sense: not a feed/fetch
// list or reader) or that paddle.static.save writes, sorted by name.
std::vector<checkpoint::StateVariable> ClassifyState(const Program& program);

}  // namespace tiller::paddle
