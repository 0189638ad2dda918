// pool2d (NCHW or NHWC, float32): max/avg with pads, ceil_mode, exclusive,
// adaptive; max_pool2d_with_index.
//
// Follows Paddle's CPU pooling exactly: a window is [o*stride - pad_begin,
// + ksize) clipped to the input (not to the padded input), and a
// non-exclusive average divides by the window clipped at in + pad_begin
// (Windows::span): ksize_h * ksize_w except where ceil_mode makes the window
// hang past that point. Adaptive bins are
// [floor(i*H/out), ceil((i+1)*H/out)) and always average over the bin. An
// empty window (possible with large pads) gives -FLT_MAX for max, as Paddle,
// and 0 for avg.
#include "backends/cpu/kernels/kernel_utils.h"
#include "backends/cpu/kernels/pool_windows.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

// Fixed (non-adaptive) windows. Each output row accumulates in place one
// (h, kx) tap at a time, so the inner loop walks output columns with a fixed
// input stride and vectorizes; [jlo, jhi) are the columns whose tap kx lands
// inside the input.
struct TapGeom {
  int64_t ih, iw, oh, ow, kw, sw, pl;
  std::vector<int64_t> jlo, jhi;
  std::vector<float> div;  // avg divisor per output (row-major), 0 for empty windows
};

template <bool kMax>
void PoolTaps(const float* xp, float* yp, const TapGeom& g, const Windows& wh) {
  for (int64_t i = 0; i < g.oh; ++i) {
    float* yr = yp + i * g.ow;
    const float init = kMax ? -std::numeric_limits<float>::max() : 0.0f;
    for (int64_t j = 0; j < g.ow; ++j) yr[j] = init;
    for (int64_t h = wh.begin[i]; h < wh.end[i]; ++h) {
      const float* xr = xp + h * g.iw;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t j0 = g.jlo[kx], j1 = g.jhi[kx], off = kx - g.pl, sw = g.sw;
        if (sw == 1) {
          for (int64_t j = j0; j < j1; ++j)
            yr[j] = kMax ? std::max(yr[j], xr[j + off]) : yr[j] + xr[j + off];
        } else if (sw == 2) {
          for (int64_t j = j0; j < j1; ++j)
            yr[j] = kMax ? std::max(yr[j], xr[2 * j + off]) : yr[j] + xr[2 * j + off];
        } else {
          for (int64_t j = j0; j < j1; ++j)
            yr[j] = kMax ? std::max(yr[j], xr[j * sw + off]) : yr[j] + xr[j * sw + off];
        }
      }
    }
    if constexpr (!kMax) {
      const float* d = g.div.data() + i * g.ow;
      for (int64_t j = 0; j < g.ow; ++j) yr[j] = d[j] > 0 ? yr[j] / d[j] : 0.0f;
    }
  }
}

// Channel-last pooling (the channels_last pass's layout): each output pixel
// reduces its window's pixels, whole rows of C channels at a time, so the
// inner loop runs over contiguous channels. Same windows and divisors as
// the NCHW kernel.
std::unique_ptr<Kernel> MakePool2dNhwc(const ir::Op& op) {
  const Shape& xs = op.inputs[0]->shape();  // [N, H, W, C] or [N, C / 8, H, W, 8]
  const Shape& ys = op.outputs[0]->shape();
  const ir::ActLayout layout = ir::ActLayoutOf(op);
  // NCHW8c is N * C / 8 NHWC images of 8 channels.
  const bool blocked = layout == ir::ActLayout::kBlocked;
  const int64_t n = blocked ? xs[0] * xs[1] : xs[0], c = blocked ? xs[4] : xs[3];
  Pool2dGeometry g = ReadPool2d(op, ir::AsNchw(xs, layout), ir::AsNchw(ys, layout));
  const bool is_max = g.is_max;
  const int64_t ih = g.ih, iw = g.iw, oh = g.oh, ow = g.ow;
  const std::vector<float> div = AvgDivisors(g);  // per output pixel; 0: empty window
  const Windows wh = g.wh, ww = g.ww;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t pixels = n * oh * ow;
    ParallelRange(
        pixels, c * 9,
        [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            const int64_t img = p / (oh * ow), i = p / ow % oh, j = p % ow;
            float* yr = y + p * c;
            const float init = is_max ? -std::numeric_limits<float>::max() : 0.0f;
            for (int64_t k = 0; k < c; ++k) yr[k] = init;
            for (int64_t h = wh.begin[i]; h < wh.end[i]; ++h) {
              for (int64_t w = ww.begin[j]; w < ww.end[j]; ++w) {
                const float* xr = x + ((img * ih + h) * iw + w) * c;
                if (is_max) {
                  for (int64_t k = 0; k < c; ++k) yr[k] = std::max(yr[k], xr[k]);
                } else {
                  for (int64_t k = 0; k < c; ++k) yr[k] += xr[k];
                }
              }
            }
            if (!is_max) {
              const float d = div[static_cast<size_t>(i * ow + j)];
              for (int64_t k = 0; k < c; ++k) yr[k] = d > 0 ? yr[k] / d : 0.0f;
            }
          }
        },
        1);
  });
}

std::unique_ptr<Kernel> MakePool2d(const ir::Op& op) {
  if (ir::ActLayoutOf(op) != ir::ActLayout::kNchw) return MakePool2dNhwc(op);
  Pool2dGeometry g = ReadPool2d(op, op.inputs[0]->shape(), op.outputs[0]->shape());
  const bool is_max = g.is_max, adaptive = g.adaptive;
  const std::vector<int64_t>&k = g.k, &s = g.s, &p = g.p;
  const int64_t planes = g.planes, ih = g.ih, iw = g.iw, oh = g.oh, ow = g.ow;
  const Windows &wh = g.wh, &ww = g.ww;
  TapGeom geom{ih, iw, oh, ow, k[1], s[1], p[2], {}, {}, {}};
  for (int64_t kx = 0; kx < k[1]; ++kx) {
    int64_t lo = p[2] - kx, hi = iw - 1 - kx + p[2];  // need lo <= j*sw <= hi
    geom.jlo.push_back(std::min(ow, lo <= 0 ? 0 : (lo + s[1] - 1) / s[1]));
    geom.jhi.push_back(hi < 0 ? 0 : std::min(ow, hi / s[1] + 1));
  }
  geom.div = AvgDivisors(g);
  bool whole_plane = oh == 1 && ow == 1 && wh.begin[0] == 0 && wh.end[0] == ih &&
                     ww.begin[0] == 0 && ww.end[0] == iw;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t plane_in = ih * iw, plane_out = oh * ow;
    if (whole_plane) {  // global pooling (ResNet's head): one row reduction per plane
      ParallelRange(
          planes, plane_in,
          [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c) {
              const float* xp = x + c * plane_in;
              y[c] = is_max ? RowMax(xp, plane_in) : RowSum(xp, plane_in) / geom.div[0];
            }
          },
          1);
      return;
    }
    ParallelRange(
        planes, plane_out * 9,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float* xp = x + c * plane_in;
            float* yp = y + c * plane_out;
            if (!adaptive) {
              if (is_max) {
                PoolTaps<true>(xp, yp, geom, wh);
              } else {
                PoolTaps<false>(xp, yp, geom, wh);
              }
              continue;
            }
            for (int64_t i = 0; i < oh; ++i) {
              const int64_t h0 = wh.begin[i], h1 = wh.end[i];
              for (int64_t j = 0; j < ow; ++j) {
                const int64_t w0 = ww.begin[j], w1 = ww.end[j];
                float v = is_max ? -std::numeric_limits<float>::max() : 0.0f;
                for (int64_t h = h0; h < h1; ++h)
                  for (int64_t w = w0; w < w1; ++w)
                    v = is_max ? std::max(v, xp[h * iw + w]) : v + xp[h * iw + w];
                if (!is_max) {
                  int64_t area = (h1 - h0) * (w1 - w0);
                  v = area > 0 ? v / static_cast<float>(area) : 0.0f;
                }
                yp[i * ow + j] = v;
              }
            }
          }
        },
        1);
  });
}

// max_pool2d_with_index: the first maximum of each (clipped) window and its
// flat index h * W + w in the input plane; an empty window (only with large
// pads) gives -FLT_MAX and index -1, as Paddle's CPU kernel.
std::unique_ptr<Kernel> MakeMaxPoolWithIndex(const ir::Op& op) {
  const Shape& is = op.inputs[0]->shape();
  const Shape& os = op.outputs[0]->shape();
  bool adaptive = op.GetBool("adaptive");
  const std::vector<int64_t>& k = op.GetInts("ksize");
  const std::vector<int64_t>& s = op.GetInts("strides");
  const std::vector<int64_t>& p = op.GetInts("pads");
  int64_t planes = is[0] * is[1], ih = is[2], iw = is[3], oh = os[2], ow = os[3];
  Windows wh = MakeWindows(ih, oh, k[0], s[0], p[0], adaptive);
  Windows ww = MakeWindows(iw, ow, k[1], s[1], p[2], adaptive);
  bool with_mask = op.outputs.size() > 1;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    int32_t* mask = with_mask ? static_cast<int32_t*>(args.outputs[1]) : nullptr;
    ParallelRange(
        planes, oh * ow * 9,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float* xp = x + c * ih * iw;
            for (int64_t i = 0; i < oh; ++i) {
              for (int64_t j = 0; j < ow; ++j) {
                float v = -std::numeric_limits<float>::max();
                int64_t at = -1;
                for (int64_t h = wh.begin[i]; h < wh.end[i]; ++h) {
                  for (int64_t w = ww.begin[j]; w < ww.end[j]; ++w) {
                    if (v < xp[h * iw + w]) {
                      v = xp[h * iw + w];
                      at = h * iw + w;
                    }
                  }
                }
                y[(c * oh + i) * ow + j] = v;
                if (with_mask) mask[(c * oh + i) * ow + j] = static_cast<int32_t>(at);
              }
            }
          }
        },
        1);
  });
}

TILLER_CPU_KERNEL("pool2d", MakePool2d, Signature("T -> T").Where("T", {DType::kF32}));
// The mask output exists when with_mask is set.
TILLER_CPU_KERNEL("max_pool2d_with_index", MakeMaxPoolWithIndex,
                  Signature("T -> T, int32?").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
