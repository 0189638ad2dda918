// A training session's checkpoint files: Paddle's (<prefix>.pdparams and
// <prefix>.pdopt, pickled dicts of arrays through the Paddle frontend's
// pickle.h, split by the state roles of state_roles.h) and Tiller's
// manifest (<prefix>.tiller.json: what Paddle's pickles do not hold, and
// each tensor's hash). A save never leaves the checkpoint unloadable
// (issue 14); a load after an interrupted save takes the last complete one.
// The session (TrainingSession::SaveCheckpoint / LoadCheckpoint) decides
// which process writes and reads, and sets its state from the files.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frontend/paddle/pickle.h"
#include "runtime/training_loss_scale.h"
#include "runtime/training_state.h"

namespace tiller::runtime {

// A checkpoint's files, read and checked against the program's state and
// their manifest (when they have one).
struct CheckpointFiles {
  std::map<std::string, paddle::PickledArray> values;
  std::optional<nlohmann::json> manifest;
};

// What the manifest records besides the tensors: where the run is (the
// step count, which draws dropout masks and tells where the data was) and
// replica 0's loss scaling.
struct CheckpointCounters {
  int64_t step = 0;
  int replicas = 1;  // summing gradients: the job's, across processes
  int accumulation_factor = 1;
  uint64_t random_seed = 0;
  LossScaling loss_scaling;
};

// The checkpoint at `prefix` (Paddle's or Tiller's), read and checked
// against `states` (every one of `names`, the program's state, must be
// there with its shape and declared dtype) and its manifest, without
// changing anything.
CheckpointFiles ReadCheckpoint(const std::string& prefix, const std::vector<std::string>& names,
                               const StateMap& states);

// ReadCheckpoint of the newest complete checkpoint at `prefix`: after an
// interrupted save, the main files if that save wrote them whole, else the
// previous set (said on stderr).
CheckpointFiles ReadNewestCheckpoint(const std::string& prefix,
                                     const std::vector<std::string>& names, const StateMap& states);

// Writes the checkpoint at `prefix` (creating its directory), crash-safe:
// `params` to .pdparams, `opts` to .pdopt, the manifest last. `names` and
// `states` check the files a save interrupted before left.
void WriteCheckpoint(const std::string& prefix, const std::vector<paddle::ArrayView>& params,
                     const std::vector<paddle::ArrayView>& opts, const CheckpointCounters& counters,
                     const std::vector<std::string>& names, const StateMap& states);

}  // namespace tiller::runtime
