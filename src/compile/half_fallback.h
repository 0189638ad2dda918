// Ops on half-precision values that no device has a half kernel for run in
// float32 between casts:
//   y:half = op(x:half, ...)   ==>   y = cast(op(cast(x, f32), ...), half)
// so a model Paddle saved in float16 / bfloat16 runs as saved (its values
// rounded to the half type between ops, as a half kernel that computes in
// float32 leaves them) on backends with half kernels for a few ops only.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "ir/graph.h"

namespace tiller::compile {

// Rewrites every op with a float16 / bfloat16 input or output that none of
// `devices` supports and that runs with those values as float32 (its output
// types, re-inferred from float32 inputs, become float32 where they were
// half). Returns the ops rewritten; `detail` lists them by type.
int RunHalfOpsInFloat32(ir::Graph& g, const std::vector<backend::Device*>& devices,
                        std::string* detail);

}  // namespace tiller::compile
