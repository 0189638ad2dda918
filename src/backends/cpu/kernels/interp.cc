// interp: Paddle's *_interp_v2 resampling of 1-3 spatial dims (NC...).
//
// Every method is separable: along each spatial dim an output position reads
// a fixed set of input positions (1 for nearest, 2 for linear, 4 for cubic)
// with fixed weights. Those taps are computed once at creation with Paddle's
// float formulas (source = ratio * o, or ratio * (o + 0.5) - 0.5 with
// align_mode 0; cubic convolution with A = -0.75 and clamped borders), and
// Run() sums the products over the tap grid. Nearest's single tap has weight
// 1, so it copies exactly. data_format NHWC (the channels_last pass): an
// output pixel is the same weighted sum of whole input pixels, each C
// contiguous values.
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels/interp_taps.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

// Nearest on integer tensors: a pure gather through the single taps.
template <typename T>
std::unique_ptr<Kernel> MakeNearestGather(const std::array<Taps, 3>& taps,
                                          const std::array<int64_t, 3>& in,
                                          const std::array<int64_t, 3>& out, int64_t planes) {
  int64_t plane_in = in[0] * in[1] * in[2], plane_out = out[0] * out[1] * out[2];
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    T* y = static_cast<T*>(args.outputs[0]);
    ParallelRange(
        planes, plane_out,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const T* xp = x + c * plane_in;
            T* yp = y + c * plane_out;
            for (int64_t od = 0; od < out[0]; ++od)
              for (int64_t oh = 0; oh < out[1]; ++oh)
                for (int64_t ow = 0; ow < out[2]; ++ow)
                  *yp++ = xp[(taps[0].idx[od] * in[1] + taps[1].idx[oh]) * in[2] + taps[2].idx[ow]];
          }
        },
        1);
  });
}

// NHWC, 2 spatial dims (taps[0] is the padding dim): one output row (n, oh)
// per work item; `T` float sums the taps' pixels, an integer type (nearest)
// copies the one pixel.
template <typename T>
std::unique_ptr<Kernel> MakeInterpNhwc(const InterpGeometry& geo, int64_t batch, int64_t channels) {
  const Taps &th = geo.taps[1], &tw = geo.taps[2];
  const int64_t ih = geo.in[1], iw = geo.in[2], oh_n = geo.out[1], ow_n = geo.out[2];
  const int64_t work = ow_n * channels * th.n * tw.n;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    T* y = static_cast<T*>(args.outputs[0]);
    ParallelRange(
        batch * oh_n, work,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const int64_t oh = r % oh_n;
            const T* xn = x + r / oh_n * ih * iw * channels;
            T* yp = y + r * ow_n * channels;
            for (int64_t ow = 0; ow < ow_n; ++ow, yp += channels) {
              if constexpr (!std::is_same_v<T, float>) {
                const T* src = xn + (th.idx[oh] * iw + tw.idx[ow]) * channels;
                std::memcpy(yp, src, channels * sizeof(T));
              } else {
                std::fill(yp, yp + channels, 0.0f);
                for (int bb = 0; bb < th.n; ++bb) {
                  const float wh = th.w[oh * th.n + bb];
                  const float* xh = xn + th.idx[oh * th.n + bb] * iw * channels;
                  for (int cc = 0; cc < tw.n; ++cc) {
                    const float w = wh * tw.w[ow * tw.n + cc];
                    const float* __restrict xp = xh + tw.idx[ow * tw.n + cc] * channels;
                    float* __restrict yc = yp;
                    for (int64_t ch = 0; ch < channels; ++ch) yc[ch] += w * xp[ch];
                  }
                }
              }
            }
          }
        },
        1);
  });
}

std::unique_ptr<Kernel> MakeInterp(const ir::Op& op) {
  DType dt = InDType(op);
  const std::string& method = op.GetStr("method");
  if (dt != DType::kF32 && method != "nearest")
    Unsupported(op, "dtype {} not supported for method {}", DTypeName(dt), method);
  const bool last = op.GetStr("data_format") == "NHWC";
  const Shape is = ir::AsNchw(op.inputs[0]->shape(), last);
  const Shape os = ir::AsNchw(op.outputs[0]->shape(), last);
  InterpGeometry geo = MakeInterpGeometry(op, is, os);
  if (last) {
    if (dt == DType::kI32) return MakeInterpNhwc<int32_t>(geo, is[0], is[1]);
    if (dt == DType::kI64) return MakeInterpNhwc<int64_t>(geo, is[0], is[1]);
    return MakeInterpNhwc<float>(geo, is[0], is[1]);
  }
  const std::array<Taps, 3>& taps = geo.taps;
  const std::array<int64_t, 3>& in = geo.in;
  const std::array<int64_t, 3>& out = geo.out;
  int64_t planes = geo.planes;
  if (dt == DType::kI32) return MakeNearestGather<int32_t>(taps, in, out, planes);
  if (dt == DType::kI64) return MakeNearestGather<int64_t>(taps, in, out, planes);
  int64_t plane_in = in[0] * in[1] * in[2], plane_out = out[0] * out[1] * out[2];
  int64_t work = plane_out * taps[0].n * taps[1].n * taps[2].n;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    const Taps &td = taps[0], &th = taps[1], &tw = taps[2];
    ParallelRange(
        planes, work,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float* xp = x + c * plane_in;
            float* yp = y + c * plane_out;
            for (int64_t od = 0; od < out[0]; ++od) {
              for (int64_t oh = 0; oh < out[1]; ++oh) {
                for (int64_t ow = 0; ow < out[2]; ++ow) {
                  float acc = 0.0f;
                  for (int a = 0; a < td.n; ++a) {
                    const float wd = td.w[od * td.n + a];
                    const float* xd = xp + td.idx[od * td.n + a] * in[1] * in[2];
                    for (int bb = 0; bb < th.n; ++bb) {
                      const float wh = wd * th.w[oh * th.n + bb];
                      const float* xh = xd + th.idx[oh * th.n + bb] * in[2];
                      float row = 0.0f;
                      for (int cc = 0; cc < tw.n; ++cc)
                        row += tw.w[ow * tw.n + cc] * xh[tw.idx[ow * tw.n + cc]];
                      acc += wh * row;
                    }
                  }
                  yp[(od * out[1] + oh) * out[2] + ow] = acc;
                }
              }
            }
          }
        },
        1);
  });
}

// Integer inputs only with method = nearest (checked by MakeInterp).
TILLER_CPU_KERNEL("interp", MakeInterp,
                  Signature("T -> T").Where("T", {DType::kF32, DType::kI32, DType::kI64}));

}  // namespace
}  // namespace tiller::cpu
