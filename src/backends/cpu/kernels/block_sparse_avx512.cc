// block_sparse.cc compiled for x86-64-v4: its AVX-512 copy (isa_copy.h).
#define TILLER_ISA_COPY_AVX512
#include "backends/cpu/kernels/block_sparse.cc"
