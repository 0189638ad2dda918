// The CPU backend's kernel conveniences over backend/kernel.h: kernels in
// backends/cpu/kernels/ register with TILLER_CPU_KERNEL next to their code.
//
//   TILLER_CPU_KERNEL("softmax", MakeSoftmax, Signature("T -> T").Where("T", {DType::kF32}));
//   TILLER_CPU_KERNEL("gather", MakeGather, Signature("T, I -> T")
//                         .Where("T", AllDTypes()).Where("I", {DType::kI32, DType::kI64}));
// and, from before signatures, the dtypes of one input (or of output 0 for
// ops without inputs), checked before the factory runs:
//   TILLER_CPU_KERNEL("embedding_grad", MakeEmbeddingGrad, {DType::kF32}, 1);
// A factory taking (const ir::Op&, backend::Device&) gets the device (oneDNN
// kernels take its engine and stream from it: dnnl_context.h).
#pragma once

#include "backend/kernel.h"

namespace tiller::cpu {

using backend::Kernel;
using backend::KernelArgs;
using backend::KernelFactory;
using backend::LambdaKernel;
using backend::OpKernelFactory;
using backend::Signature;
using ::tiller::AllDTypes;

bool RegisterKernel(const std::string& op_type, OpKernelFactory factory, std::vector<DType> dtypes,
                    int dtype_input = 0);
bool RegisterKernel(const std::string& op_type, OpKernelFactory factory,
                    backend::Signature signature);
bool RegisterKernel(const std::string& op_type, KernelFactory factory,
                    backend::Signature signature);

// For tests and tools: the op's CPU kernel, created for a scratch device and
// run on the caller's thread. Compiled models create theirs per device.
std::unique_ptr<Kernel> CreateKernel(const ir::Op& op);
// CreateKernel's checks without the factory: a kernel exists and its
// signature fits. Fails (kUnimplemented) with the reason.
void CheckKernelSupports(const ir::Op& op);
bool HasKernel(const std::string& op_type);
const std::vector<DType>* KernelDTypes(const std::string& op_type);

}  // namespace tiller::cpu

#define TILLER_CPU_KERNEL_CONCAT2(a, b) a##b
#define TILLER_CPU_KERNEL_CONCAT(a, b) TILLER_CPU_KERNEL_CONCAT2(a, b)
#define TILLER_CPU_KERNEL(op_type, factory, ...)                                \
  static const bool TILLER_CPU_KERNEL_CONCAT(tiller_cpu_kernel_, __COUNTER__) = \
      ::tiller::cpu::RegisterKernel(op_type, factory, __VA_ARGS__)
