// The model a predictor's Config names, loaded: a program file and its
// parameters, a model directory, or the buffers of Config::SetModelBuffer.
#pragma once

#include "frontend/paddle/program.h"
#include "tiller/predictor.h"

namespace tiller::runtime {

// Throws tiller::Error naming the file (or "<model buffer>") on failure, and
// kInvalidArgument when the config names no model. From files, the
// parameters' bytes are left to be read again when a kernel needs them
// (paddle::ParamSource) unless TILLER_KEEP_LOADED_WEIGHTS=1; from memory
// they stay loaded.
paddle::Model LoadConfiguredModel(const inference::Config& config);

}  // namespace tiller::runtime
