// quantize_linear / dequantize_linear with Paddle's float32 arithmetic (its
// CPU functors in phi/kernels/funcs/fake_quantize_functor.cc): the quantize
// multiplies by (qmax * (1 / s)) rather than dividing, so the same inputs
// round to the same integers. The scale is read at run time (one value, or
// one per channel of quant_axis).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/simd.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

// x viewed as [outer, channels, inner] around quant_axis (per tensor:
// one channel holding everything).
struct ChannelView {
  int64_t outer = 1, channels = 1, inner = 1;
};

ChannelView ViewOf(const ir::Op& op) {
  const Shape& s = op.inputs[0]->shape();
  const int64_t axis = op.GetInt("quant_axis");
  ChannelView v;
  if (axis < 0) {
    v.inner = NumElements(s);
    return v;
  }
  for (int64_t d = 0; d < axis; ++d) v.outer *= s[d];
  v.channels = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) v.inner *= s[d];
  return v;
}

// Calls f(begin, end, channel) over runs of elements sharing a channel,
// split across the threads by element (a per-tensor scale is one run).
template <typename F>
void ForEachChannelRun(const ChannelView& v, F&& f) {
  ParallelRange(v.outer * v.channels * v.inner, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {
      const int64_t run = i / v.inner;
      const int64_t end = std::min(e, (run + 1) * v.inner);
      f(i, end, run % v.channels);
      i = end;
    }
  });
}

// y[i] = clamp(rint(k * x[i]), lo, hi) for i in [b, e): rounding half to
// even (the default rounding mode), as O.
template <typename O>
void RoundAndClamp(const float* x, O* y, int64_t b, int64_t e, float k, float lo, float hi) {
  int64_t i = b;
  // Whole vectors (max / min take the bound for a NaN there: simd.h), then
  // the rest one by one.
  if constexpr (simd::kLanes > 1) {
    const simd::Vec vk = simd::Set(k), vlo = simd::Set(lo), vhi = simd::Set(hi);
    for (; i + simd::kLanes <= e; i += simd::kLanes) {
      const simd::Vec v =
          simd::Min(simd::Max(simd::RoundNearest(vk * simd::Load(x + i)), vlo), vhi);
      if constexpr (std::is_same_v<O, float>) {
        simd::Store(y + i, v);
      } else {
        simd::StoreInt8(y + i, v);
      }
    }
  }
  for (; i < e; ++i) y[i] = static_cast<O>(std::min(std::max(std::rint(k * x[i]), lo), hi));
}

// `O`: float (Paddle's integer-valued result) or int8_t (out_dtype int8:
// the same integers, which fit since qmax <= 127).
template <typename O>
std::unique_ptr<Kernel> Quantize(const ChannelView& view, float qmax, bool half_even) {
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    O* y = static_cast<O*>(args.outputs[0]);
    ForEachChannelRun(view, [&](int64_t b, int64_t e, int64_t c) {
      const float s = scale[c];
      const float inv = s <= 1e-30f ? 1.0f / (s + 1e-6f) : 1.0f / s;
      const float k = qmax * inv;
      if (half_even) {
        RoundAndClamp(x, y, b, e, k, -qmax - 1.0f, qmax);
      } else {
        for (int64_t i = b; i < e; ++i)
          y[i] = static_cast<O>(std::round(k * std::min(std::max(x[i], -s), s)));
      }
    });
  });
}

std::unique_ptr<Kernel> MakeQuantize(const ir::Op& op) {
  const ChannelView view = ViewOf(op);
  const auto qmax = static_cast<float>(op.GetInt("qmax"));
  const bool half_even = op.GetInt("round_type") == 0;
  if (OutDType(op) == DType::kI8) return Quantize<int8_t>(view, qmax, half_even);
  return Quantize<float>(view, qmax, half_even);
}

template <typename T>
std::unique_ptr<Kernel> Dequantize(const ChannelView& view, float qmax) {
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    ForEachChannelRun(view, [&](int64_t b, int64_t e, int64_t c) {
      const float s = scale[c];
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(x[i]) * s / qmax;
    });
  });
}

std::unique_ptr<Kernel> MakeDequantize(const ir::Op& op) {
  const ChannelView view = ViewOf(op);
  const auto qmax = static_cast<float>(op.GetInt("qmax"));
  if (InDType(op) == DType::kI8) return Dequantize<int8_t>(view, qmax);
  return Dequantize<float>(view, qmax);
}

TILLER_CPU_KERNEL_COPY(
    "quantize_linear", MakeQuantize,
    Signature("T, float32 -> O").Where("T", {DType::kF32}).Where("O", {DType::kF32, DType::kI8}));
TILLER_CPU_KERNEL_COPY("dequantize_linear", MakeDequantize,
                       Signature("T, float32 -> float32").Where("T", {DType::kF32, DType::kI8}));

}  // namespace
}  // namespace tiller::cpu::TILLER_ISA_COPY
