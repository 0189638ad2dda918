// accumulate(acc, g) -> acc + g (ir/ops/training.cc): gradient accumulation.
// Each element is read before it is written, so out may be acc's storage.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

template <typename T>
std::unique_ptr<Kernel> MakeAccumulateOf(int64_t n) {
  return std::make_unique<LambdaKernel>([n](const KernelArgs& args) {
    const T* acc = static_cast<const T*>(args.inputs[0]);
    const T* g = static_cast<const T*>(args.inputs[1]);
    T* out = static_cast<T*>(args.outputs[0]);
    ParallelRange(n, 2, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = acc[i] + g[i];
    });
  });
}

std::unique_ptr<Kernel> MakeAccumulate(const ir::Op& op) {
  const int64_t n = NumElements(op.inputs[0]->shape());
  if (op.inputs[0]->dtype() == DType::kF64) return MakeAccumulateOf<double>(n);
  return MakeAccumulateOf<float>(n);
}

TILLER_CPU_KERNEL("accumulate", MakeAccumulate,
                  Signature("T, T -> T").Where("T", {DType::kF32, DType::kF64}));

}  // namespace
}  // namespace tiller::cpu
