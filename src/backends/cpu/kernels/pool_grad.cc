// pool2d_grad and max_pool2d_with_index_grad (NCHW, float32). Planes are
// independent, so threads split planes and never write the same element.
//
// Max pooling follows Paddle's MaxPool2dGradFunctor: an output's gradient
// goes to the first position (row-major in its window) whose input equals
// the pooled value, once, even when several inputs tie. Averages spread
// dy * (1 / divisor) over the window with the divisor the forward kernel
// (pool.cc) uses; an empty window passes nothing.
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/pool_windows.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakePool2dGrad(const ir::Op& op) {
  Pool2dGeometry g = ReadPool2d(op, op.inputs[0]->shape(), op.inputs[1]->shape());
  const bool is_max = g.is_max;
  const int64_t planes = g.planes, ih = g.ih, iw = g.iw, oh = g.oh, ow = g.ow;
  const Windows &wh = g.wh, &ww = g.ww;
  std::vector<float> scale;  // avg: 1 / divisor per output, 0 for empty windows
  if (!is_max) {
    for (float d : AvgDivisors(g)) scale.push_back(d == 0 ? 0.0f : 1.0f / d);
  }
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* y = static_cast<const float*>(args.inputs[1]);
    const float* dy = static_cast<const float*>(args.inputs[2]);
    float* dx = static_cast<float*>(args.outputs[0]);
    const int64_t plane_in = ih * iw, plane_out = oh * ow;
    ParallelRange(
        planes, plane_in + plane_out * 9,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float* xp = x + c * plane_in;
            const float* yp = y + c * plane_out;
            const float* gp = dy + c * plane_out;
            float* dp = dx + c * plane_in;
            std::fill(dp, dp + plane_in, 0.0f);
            for (int64_t i = 0; i < oh; ++i) {
              for (int64_t j = 0; j < ow; ++j) {
                const int64_t o = i * ow + j;
                if (is_max) {
                  bool found = false;
                  for (int64_t h = wh.begin[i]; h < wh.end[i] && !found; ++h) {
                    for (int64_t w = ww.begin[j]; w < ww.end[j]; ++w) {
                      if (xp[h * iw + w] == yp[o]) {
                        dp[h * iw + w] += gp[o];
                        found = true;
                        break;
                      }
                    }
                  }
                } else {
                  const float v = gp[o] * scale[o];
                  for (int64_t h = wh.begin[i]; h < wh.end[i]; ++h) {
                    for (int64_t w = ww.begin[j]; w < ww.end[j]; ++w) dp[h * iw + w] += v;
                  }
                }
              }
            }
          }
        },
        1);
  });
}

std::unique_ptr<Kernel> MakeMaxPoolIndexGrad(const ir::Op& op) {
  const Shape& is = op.outputs[0]->shape();
  const Shape& os = op.inputs[1]->shape();
  int64_t planes = is[0] * is[1], plane_in = is[2] * is[3], plane_out = os[2] * os[3];
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const int32_t* mask = static_cast<const int32_t*>(args.inputs[0]);
    const float* dy = static_cast<const float*>(args.inputs[1]);
    float* dx = static_cast<float*>(args.outputs[0]);
    ParallelRange(
        planes, plane_in + plane_out,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            float* dp = dx + c * plane_in;
            std::fill(dp, dp + plane_in, 0.0f);
            for (int64_t o = 0; o < plane_out; ++o) {
              int32_t at = mask[c * plane_out + o];
              if (at >= 0 && at < plane_in) dp[at] += dy[c * plane_out + o];
            }
          }
        },
        1);
  });
}

TILLER_CPU_KERNEL("pool2d_grad", MakePool2dGrad,
                  Signature("T, T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("max_pool2d_with_index_grad", MakeMaxPoolIndexGrad,
                  Signature("int32, T -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
