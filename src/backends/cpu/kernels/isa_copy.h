// CPU kernel files compiled once per instruction set, one copy chosen at
// start-up: a kernel file written on simd.h (whose vector width follows the
// -march it is compiled for) is compiled as itself, for the build's own
// level, and again by a <file>_avx512.cc that defines TILLER_ISA_COPY_AVX512
// and includes it; CMakeLists.txt compiles every *_avx512.cc for x86-64-v4
// and links those objects last.
//
// Such a file includes this header first, puts its code in namespace
// tiller::cpu::TILLER_ISA_COPY (isa_base or isa_avx512) and registers its
// kernels only where its copy runs:
//   namespace tiller::cpu::TILLER_ISA_COPY { namespace {
//   ...
//   const bool kRegistered = TILLER_ISA_COPY_RUNS && [] { RegisterKernel(...); ... }();
//   }}
// The namespaces keep the copies' functions apart at link time: a function
// compiled for AVX-512 can never stand in for the build's own copy on a CPU
// without it (tests/python/packaging_test.py checks the library with
// objdump). The AVX-512 copy runs where the CPU, under TILLER_MAX_ISA, has
// AVX-512 and the build's own level is below it (the wheel's x86-64-v3);
// otherwise the build's own copy, which at -march=native on an AVX-512
// machine is AVX-512 already.
#pragma once

#if defined(TILLER_ISA_COPY_AVX512)
#if !defined(__AVX512F__)
#error "an *_avx512.cc file must be compiled for x86-64-v4 (CMakeLists.txt)"
#endif
#define TILLER_ISA_COPY isa_avx512
#define TILLER_ISA_COPY_IS_AVX512 true
#else
#define TILLER_ISA_COPY isa_base
#define TILLER_ISA_COPY_IS_AVX512 false
#endif

namespace tiller::cpu {

// Whether the AVX-512 copies run in this process; decided once, and
// reported as "Tiller kernels" by `tiller info`.
bool RunAvx512Copies();

}  // namespace tiller::cpu

// True in the copy that runs here: its registrations are the ones made.
#define TILLER_ISA_COPY_RUNS (::tiller::cpu::RunAvx512Copies() == TILLER_ISA_COPY_IS_AVX512)

// TILLER_CPU_KERNEL (backends/cpu/kernel.h) for a per-ISA file: registers
// only in the copy that runs.
#define TILLER_CPU_KERNEL_COPY(op_type, factory, ...)                           \
  static const bool TILLER_CPU_KERNEL_CONCAT(tiller_cpu_kernel_, __COUNTER__) = \
      TILLER_ISA_COPY_RUNS && ::tiller::cpu::RegisterKernel(op_type, factory, __VA_ARGS__)
