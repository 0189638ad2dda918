// The checks of a training session's options: each failure is
// kInvalidArgument (a value or combination that means nothing) or
// kUnimplemented (one Tiller does not run yet), naming the options.
#pragma once

#include <string>

#include "frontend/paddle/training.h"
#include "tiller/training.h"

namespace tiller::runtime {

// Checks `options` and, with distribution, resolves the job's replicas:
// global_replicas and global_replica_offset from the MPI job, checked
// against what the options say (Paddle's global_replication_factor and
// global_replica_offset, which IPU scripts compute from the launcher's
// environment). Every process of the job learns whether any refused its
// distribution options: all fail together, none waits in a collective for
// a process that gave up.
void ResolveSessionOptions(training::SessionOptions& options, const std::string& program_path);

// Checks the loss scaling options (`options` resolved) against each other,
// the session's devices and sharding, and the program's own loss scaling
// (Paddle AMP's ops, in `info`).
void CheckLossScalingOptions(const training::SessionOptions& options,
                             const paddle::TrainingProgramInfo& info,
                             const std::string& program_path);

}  // namespace tiller::runtime
