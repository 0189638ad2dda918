// The compile options of one replica of a training session: its devices and
// their threads, placement, accumulation, replication and its collectives,
// optimizer-state sharding, recomputation. TrainingSession and the planner
// (runtime/planner.cc) both take them from here, so a plan compiles what a
// session would run.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "compile/options.h"
#include "frontend/paddle/program.h"
#include "ir/graph.h"
#include "tiller/training.h"

namespace tiller::backend {
class Collective;
}

namespace tiller::runtime {

// Replica `rank`'s options; `groups` holds, per device of a replica, the
// collective of that device in every replica (empty without replicas).
compile::CompileOptions ReplicaCompileOptions(const training::SessionOptions& options, int rank,
                                              const std::vector<backend::Collective*>& groups);

// How a training session stores each persistable of `program`: as declared,
// except the optimizer accumulators PrecisionSettings::accl_types makes
// FLOAT16 (float32 ones become float16). The names are checked by
// PrecisionSettings::Validate before.
std::map<std::string, ir::TensorType> StoredStateTypes(
    const paddle::Program& program, const std::vector<std::string>& state,
    const std::array<std::string, 3>& accl_types);

}  // namespace tiller::runtime
