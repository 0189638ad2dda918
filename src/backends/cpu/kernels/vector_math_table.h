// The vectorized float math of one instruction set (vector_math_impl.h), as
// a table of its functions: each per-ISA translation unit defines one, and
// vector_math.cc picks one at start-up.
#pragma once

#include <cstdint>

namespace tiller::cpu {

struct VectorMath {
  void (*exp)(const float*, float*, int64_t);
  void (*tanh)(const float*, float*, int64_t);
  void (*sigmoid)(const float*, float*, int64_t);
  void (*erf)(const float*, float*, int64_t);
  void (*gelu)(const float*, float*, int64_t);
  void (*gelu_tanh)(const float*, float*, int64_t);
  void (*swish)(const float*, float*, int64_t, float);
  float (*row_sum)(const float*, int64_t);
  float (*row_max)(const float*, int64_t);
  float (*row_sum_sq_diff)(const float*, int64_t, float, float*);
  float (*row_exp_sum)(const float*, float*, int64_t, float);
  void (*gelu_grad)(const float*, const float*, float*, int64_t, bool);
  void (*floats_to_bf16)(const float*, uint16_t*, int64_t);
  void (*bf16_to_floats)(const uint16_t*, float*, int64_t);
  bool vector_interleave3;
  void (*interleave3)(const uint32_t*, const uint32_t*, const uint32_t*, uint32_t*, int64_t);
};

// The table of the TU that includes vector_math_impl.h with
// its copy's namespace (TILLER_ISA_COPY), built from its functions (constant: no code runs
// to make it).
#define TILLER_VECTOR_MATH_TABLE(ns)                                             \
  namespace tiller::cpu::ns {                                                    \
  extern const VectorMath kVectorMath;                                           \
  const VectorMath kVectorMath{                                                  \
      &VExp,       &VTanh,     &VSigmoid,     &VErf,         &VGelu,             \
      &VGeluTanh,  &VSwish,    &RowSum,       &RowMax,       &RowSumSqDiff,      \
      &RowExpSum,  &VGeluGrad, &FloatsToBF16, &BF16ToFloats, kVectorInterleave3, \
      &Interleave3};                                                             \
  }

namespace isa_base {
extern const VectorMath kVectorMath;  // the build's own level (vector_math.cc)
}
namespace isa_avx512 {
extern const VectorMath kVectorMath;  // x86-64-v4 (vector_math_avx512.cc)
}

}  // namespace tiller::cpu
