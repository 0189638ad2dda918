// The vectorized float math compiled for x86-64-v4 (AVX-512 F, BW, CD, DQ,
// VL; CMakeLists.txt compiles every *_avx512.cc so), used where the CPU has
// AVX-512 and the build's own level is below it (the wheel's x86-64-v3):
// vector_math.cc decides.
#define TILLER_ISA_COPY_AVX512
#include "backends/cpu/kernels/vector_math_impl.h"
#include "backends/cpu/kernels/vector_math_table.h"

TILLER_VECTOR_MATH_TABLE(isa_avx512)
