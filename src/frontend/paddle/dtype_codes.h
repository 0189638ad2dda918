// Paddle's dtype codes, in one place: framework.proto's VarType.Type numbers
// (legacy VarDescs, tensor records in .pdiparams, `dtype`/`out_dtype`
// attributes) and the PIR spellings (phi::DataTypeToString), against
// Tiller's DType (core/dtype.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tiller::paddle {

// The VarType code of an element type Tiller supports; false for any other
// code (complex, fp8, uint16..64, non-tensor types).
bool DTypeFromVarType(int64_t code, DType* out);
int64_t VarTypeFromDType(DType t);
// "FP32", "FEED_MINIBATCH", or "type <n>" when unknown; for messages.
std::string VarTypeName(int64_t code);
// PIR dtype spellings ("float32", "int64", "Undefined(ALL_DTYPE)") to
// VarType codes; -1 for undefined, false for an unknown spelling.
bool VarTypeFromPirDTypeName(const std::string& name, int64_t* code);

}  // namespace tiller::paddle
