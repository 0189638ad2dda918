// Reverse-mode automatic differentiation on the IR.
//
//   forward ops ... -> loss            (loss: any shape; seeded with ones)
//   ==> forward ops, then backward ops appended in reverse order, producing
//       d loss / d v for every requested v
// Only ops on a path from a requested value to the loss are differentiated;
// gradients of values used several times are summed.
#pragma once

#include <map>
#include <vector>

#include "ir/graph.h"

namespace tiller::passes {

// Appends the backward graph. Returns, for each value in `wrt`, its gradient
// (a zero constant when the loss does not depend on it). Fails with
// kUnimplemented naming the op when an op on the path has no gradient rule.
// `seed`: d loss / d loss, the loss scale (static loss scaling: every
// gradient comes out multiplied by it, and the caller divides it out).
// `seed_value`, when given, replaces it: a value of the loss's type (dynamic
// loss scaling: a state the caller sets before each run).
std::map<const ir::Value*, ir::Value*> BuildBackward(ir::Graph& g, ir::Value* loss,
                                                     const std::vector<ir::Value*>& wrt,
                                                     float seed = 1.0f,
                                                     ir::Value* seed_value = nullptr);

}  // namespace tiller::passes
