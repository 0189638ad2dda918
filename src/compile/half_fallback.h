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

// Whether every one of `devices` has a GEMM that multiplies `half` operands
// (matmul, float32 result): the mixed-precision pass computes in `half`
// then, else it rounds the operands to `half` and multiplies in float32.
// oneDNN 2.6 on a CPU without AVX-512 multiplies no half type.
bool DevicesMultiplyIn(const std::vector<backend::Device*>& devices, DType half);
bool BackendMultipliesIn(const backend::Backend& backend, DType half);

// Whether every one of `devices` runs linear_int8 (int8 x int8 GEMMs, exact
// int32 sums): the int8 passes rewrite quantized pairs into int8 GEMMs only
// then (passes::PassContext::int8_gemms).
bool DevicesMultiplyInt8(const std::vector<backend::Device*>& devices);
bool BackendMultipliesInt8(const backend::Backend& backend);

}  // namespace tiller::compile
