// conv2d_transpose (NCHW, float32), direct (matmul.cc registers the op's
// kernel: oneDNN's deconvolution, and this one where oneDNN's does not fit): every input pixel
// scatters its kernel window into the output. Each task owns one output plane (n, oc) and gathers
// from the input channels of its group, so planes need no locking and the innermost loop walks an
// input row with a fixed output stride. The column range of each kernel tap that lands inside the
// output is computed at creation; output_size beyond the window arithmetic (output_padding) is just
// output that no tap reaches, which keeps the bias.
#include "backends/cpu/kernels/conv_transpose.h"

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {

std::unique_ptr<Kernel> MakeDirectConvTranspose(const ir::Op& op) {
  const Shape& xs = op.inputs[0]->shape();
  const Shape& ws = op.inputs[1]->shape();
  const Shape& ys = op.outputs[0]->shape();
  bool has_bias = op.input(2) != nullptr;
  int64_t groups = op.GetInt("groups");
  std::vector<int64_t> st = op.GetInts("strides");
  std::vector<int64_t> pads = op.GetInts("pads");
  std::vector<int64_t> dil = op.GetInts("dilations");
  int64_t batch = xs[0], ic = xs[1], ih = xs[2], iw = xs[3];
  int64_t oc = ys[1], oh = ys[2], ow = ys[3], kh = ws[2], kw = ws[3];
  int64_t icpg = ic / groups, ocpg = oc / groups;
  // For tap kx, input columns [xlo, xhi) land inside the output.
  std::vector<int64_t> xlo(kw), xhi(kw);
  for (int64_t kx = 0; kx < kw; ++kx) {
    int64_t off = kx * dil[1] - pads[2];  // ox = ix * st + off
    int64_t lo = off >= 0 ? 0 : (-off + st[1] - 1) / st[1];
    int64_t hi = ow - 1 - off < 0 ? 0 : (ow - 1 - off) / st[1] + 1;
    xlo[kx] = std::min(lo, iw);
    xhi[kx] = std::max(xlo[kx], std::min(hi, iw));
  }
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* w = static_cast<const float*>(args.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    ParallelRange(
        batch * oc, icpg * ih * iw * kh * kw,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            int64_t n = t / oc, o = t % oc, g = o / ocpg, oo = o % ocpg;
            float* yp = y + t * oh * ow;
            std::fill(yp, yp + oh * ow, has_bias ? bias[o] : 0.0f);
            for (int64_t c = g * icpg; c < (g + 1) * icpg; ++c) {
              const float* xp = x + (n * ic + c) * ih * iw;
              const float* wp = w + (c * ocpg + oo) * kh * kw;
              for (int64_t ky = 0; ky < kh; ++ky) {
                for (int64_t iy = 0; iy < ih; ++iy) {
                  int64_t oy = iy * st[0] - pads[0] + ky * dil[0];
                  if (oy < 0 || oy >= oh) continue;
                  const float* xr = xp + iy * iw;
                  float* yr = yp + oy * ow;
                  for (int64_t kx = 0; kx < kw; ++kx) {
                    const float wv = wp[ky * kw + kx];
                    const int64_t off = kx * dil[1] - pads[2], s = st[1];
                    for (int64_t ix = xlo[kx]; ix < xhi[kx]; ++ix) yr[ix * s + off] += xr[ix] * wv;
                  }
                }
              }
            }
          }
        },
        1);
  });
}

}  // namespace tiller::cpu
