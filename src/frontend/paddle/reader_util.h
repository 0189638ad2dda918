// Helpers shared by the Paddle readers (program.cc, program_reader.cc,
// params_reader.cc, pir_reader.cc, model_loader.cc). Not a public interface.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tiller::paddle {

// framework.proto VarType.Type codes of the element types Tiller supports.
// Returns false for any other code (complex, fp8, uint16..64, non-tensors).
bool DTypeFromVarType(int64_t code, DType* out);
int64_t VarTypeFromDType(DType t);
// "FP32", "FEED_MINIBATCH", or the number when unknown; for messages.
std::string VarTypeName(int64_t code);

// PIR dtype attribute spellings ("float32", "int64", "Undefined(ALL_DTYPE)")
// to VarType codes; -1 for undefined, false for an unknown spelling.
bool VarTypeFromPirDTypeName(const std::string& name, int64_t* code);

// Whole file as bytes; kNotFound naming `what` and the path when it cannot be
// opened, kDataLoss when reading fails midway.
std::string ReadFileBytes(const std::string& path, const char* what);

}  // namespace tiller::paddle
