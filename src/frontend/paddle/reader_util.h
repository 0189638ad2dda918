// Helpers shared by the Paddle readers (program.cc, program_reader.cc,
// params_reader.cc, pir_reader.cc, model_loader.cc). Not a public interface.
#pragma once

#include <cstdint>
#include <string>

#include "frontend/paddle/dtype_codes.h"

namespace tiller::paddle {

// Whole file as bytes; kNotFound naming `what` and the path when it cannot be
// opened, kDataLoss when reading fails midway.
std::string ReadFileBytes(const std::string& path, const char* what);

}  // namespace tiller::paddle
