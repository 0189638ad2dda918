// The CPU backend's view of the kernel interface (backend/kernel.h): kernels
// in backends/cpu/kernels/ register with TILLER_CPU_KERNEL next to their code.
#pragma once

#include "backend/kernel.h"

namespace tiller::cpu {

using backend::CheckKernelSupports;
using backend::CreateKernel;
using backend::HasKernel;
using backend::Kernel;
using backend::KernelArgs;
using backend::KernelDTypes;
using backend::KernelFactory;
using backend::LambdaKernel;
using backend::RegisterKernel;
using ::tiller::AllDTypes;

}  // namespace tiller::cpu

// Registers from a static initializer next to the kernel's code; the
// arguments after the factory are RegisterKernel's (dtypes, dtype_input):
//   TILLER_CPU_KERNEL("softmax", MakeSoftmax, {DType::kF32});
#define TILLER_CPU_KERNEL_CONCAT2(a, b) a##b
#define TILLER_CPU_KERNEL_CONCAT(a, b) TILLER_CPU_KERNEL_CONCAT2(a, b)
#define TILLER_CPU_KERNEL(op_type, factory, ...)                                \
  static const bool TILLER_CPU_KERNEL_CONCAT(tiller_cpu_kernel_, __COUNTER__) = \
      ::tiller::cpu::RegisterKernel(op_type, factory, __VA_ARGS__)
