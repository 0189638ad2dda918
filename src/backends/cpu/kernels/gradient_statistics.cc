// gradient_histogram(x){edge, underflow} (ir/ops/training.cc): counts of
// x's elements flushed by a half type, below the loss-scaling edge, and at
// or above it (NaN and Inf included). float32, bfloat16 and float16 inputs.
#include <atomic>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

template <typename T>
float AsFloat(T v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BF16ToFloat(v.bits);
  else
    return HalfToFloat(v.bits);
}

template <typename T>
std::unique_ptr<Kernel> MakeHistogramOf(int64_t n, float edge, float underflow) {
  return std::make_unique<LambdaKernel>([n, edge, underflow](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    std::atomic<int64_t> flushed{0}, above{0};
    ParallelRange(n, 4, [&](int64_t b, int64_t e) {
      int64_t f = 0, a = 0;
      for (int64_t i = b; i < e; ++i) {
        const float v = std::fabs(AsFloat(x[i]));
        f += v > 0 && v <= underflow;
        a += !(v < edge);  // NaN counts as above
      }
      flushed += f;
      above += a;
    });
    double* out = static_cast<double*>(args.outputs[0]);
    out[0] = static_cast<double>(flushed.load());
    out[2] = static_cast<double>(above.load());
    out[1] = static_cast<double>(n) - out[0] - out[2];
  });
}

std::unique_ptr<Kernel> MakeGradientHistogram(const ir::Op& op) {
  const int64_t n = NumElements(op.inputs[0]->shape());
  const auto edge = static_cast<float>(op.GetFloat("edge"));
  const auto underflow = static_cast<float>(op.GetFloat("underflow"));
  switch (op.inputs[0]->dtype()) {
    case DType::kBF16:
      return MakeHistogramOf<BFloat16>(n, edge, underflow);
    case DType::kF16:
      return MakeHistogramOf<Half>(n, edge, underflow);
    default:
      return MakeHistogramOf<float>(n, edge, underflow);
  }
}

TILLER_CPU_KERNEL("gradient_histogram", MakeGradientHistogram,
                  Signature("T -> float64").Where("T", {DType::kF32, DType::kBF16, DType::kF16}));

}  // namespace
}  // namespace tiller::cpu
