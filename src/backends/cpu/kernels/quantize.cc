// quantize_linear / dequantize_linear with Paddle's float32 arithmetic (its
// CPU functors in phi/kernels/funcs/fake_quantize_functor.cc): the quantize
// multiplies by (qmax * (1 / s)) rather than dividing, so the same inputs
// round to the same integers. The scale is read at run time (one value, or
// one per channel of quant_axis).
#include <cmath>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
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

// Calls f(begin, end, channel) over every run of elements sharing a channel.
template <typename F>
void ForEachChannelRun(const ChannelView& v, F&& f) {
  ParallelRange(v.outer * v.channels, v.inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r * v.inner, (r + 1) * v.inner, r % v.channels);
  });
}

std::unique_ptr<Kernel> MakeQuantize(const ir::Op& op) {
  const ChannelView view = ViewOf(op);
  const auto qmax = static_cast<float>(op.GetInt("qmax"));
  const bool half_even = op.GetInt("round_type") == 0;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    ForEachChannelRun(view, [&](int64_t b, int64_t e, int64_t c) {
      const float s = scale[c];
      const float inv = s <= 1e-30f ? 1.0f / (s + 1e-6f) : 1.0f / s;
      const float k = qmax * inv;
      if (half_even) {
        // nearbyint rounds half to even in the default rounding mode.
        for (int64_t i = b; i < e; ++i)
          y[i] = std::min(std::max(std::nearbyint(k * x[i]), -qmax - 1.0f), qmax);
      } else {
        for (int64_t i = b; i < e; ++i) y[i] = std::round(k * std::min(std::max(x[i], -s), s));
      }
    });
  });
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

TILLER_CPU_KERNEL("quantize_linear", MakeQuantize,
                  Signature("T, float32 -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("dequantize_linear", MakeDequantize,
                  Signature("T, float32 -> float32").Where("T", {DType::kF32, DType::kI8}));

}  // namespace
}  // namespace tiller::cpu
