// scale_tensor(x, s){bias, bias_after_scale}: x * s + bias or (x + bias) * s
// with s read from its one-element tensor when the step runs (Paddle's
// ScaleTensor, computed by the program). Arithmetic is x's, as Paddle's
// kernel converts scale and bias to x's type first: integers truncate the
// bias and wrap on overflow; float16 and bfloat16 round the product before
// adding, as Eigen's half arithmetic does.
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// Paddle's conversion of the bias attribute to x's type. Integers go
// through int64 so an out-of-range bias wraps instead of being undefined.
template <typename T>
T BiasOf(double b) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{FloatToHalf(static_cast<float>(b))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{FloatToBF16(static_cast<float>(b))};
  } else if constexpr (std::is_integral_v<T>) {
    constexpr double kLimit = 9.2e18;  // inside int64's range
    return static_cast<T>(static_cast<int64_t>(std::clamp(std::trunc(b), -kLimit, kLimit)));
  } else {
    return static_cast<T>(b);
  }
}

// a * b and a + b in T's arithmetic.
template <typename T>
struct Arith {
  static T Mul(T a, T b) {
    if constexpr (std::is_integral_v<T>)  // wraps (unsigned arithmetic is modular)
      return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else
      return a * b;
  }
  static T Add(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else
      return a + b;
  }
};
template <>
struct Arith<Half> {
  static Half Mul(Half a, Half b) {
    return Half{FloatToHalf(HalfToFloat(a.bits) * HalfToFloat(b.bits))};
  }
  static Half Add(Half a, Half b) {
    return Half{FloatToHalf(HalfToFloat(a.bits) + HalfToFloat(b.bits))};
  }
};
template <>
struct Arith<BFloat16> {
  static BFloat16 Mul(BFloat16 a, BFloat16 b) {
    return BFloat16{FloatToBF16(BF16ToFloat(a.bits) * BF16ToFloat(b.bits))};
  }
  static BFloat16 Add(BFloat16 a, BFloat16 b) {
    return BFloat16{FloatToBF16(BF16ToFloat(a.bits) + BF16ToFloat(b.bits))};
  }
};

template <typename T>
std::unique_ptr<Kernel> ScaleTensorKernel(const ir::Op& op) {
  const int64_t n = NumElements(op.outputs[0]->shape());
  const T b = BiasOf<T>(op.GetFloat("bias"));
  const bool after = op.GetBool("bias_after_scale");
  return std::make_unique<LambdaKernel>([n, b, after](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    const T s = *static_cast<const T*>(args.inputs[1]);
    T* y = static_cast<T*>(args.outputs[0]);
    using A = Arith<T>;
    ParallelRange(n, 1, [&](int64_t lo, int64_t hi) {
      if (after) {
        for (int64_t i = lo; i < hi; ++i) y[i] = A::Add(A::Mul(x[i], s), b);
      } else {
        for (int64_t i = lo; i < hi; ++i) y[i] = A::Mul(A::Add(x[i], b), s);
      }
    });
  });
}

std::unique_ptr<Kernel> MakeScaleTensor(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int8_t, uint8_t, int16_t, int32_t, int64_t, Half, BFloat16>(
      InDType(op), [&](auto tag) { k = ScaleTensorKernel<decltype(tag)>(op); });
  return k;
}

const bool kRegistered = [] {
  using enum DType;
  RegisterKernel(
      "scale_tensor", MakeScaleTensor,
      Signature("T, T -> T").Where("T", {kF32, kF64, kI8, kU8, kI16, kI32, kI64, kF16, kBF16}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
