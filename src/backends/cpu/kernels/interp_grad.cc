// interp_grad (float32): the transpose of interp's tap sums. Each output
// gradient is scattered back onto the input positions its taps read, with
// the same weights (interp_taps.h). Threads split planes, so no two write the
// same element.
#include "backends/cpu/kernels/interp_taps.h"
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakeInterpGrad(const ir::Op& op) {
  InterpGeometry geo = MakeInterpGeometry(op, op.outputs[0]->shape(), op.inputs[0]->shape());
  int64_t plane_in = geo.in[0] * geo.in[1] * geo.in[2];
  int64_t plane_out = geo.out[0] * geo.out[1] * geo.out[2];
  int64_t work = plane_in + plane_out * geo.taps[0].n * geo.taps[1].n * geo.taps[2].n;
  return std::make_unique<LambdaKernel>([geo, plane_in, plane_out, work](const KernelArgs& args) {
    const float* dy = static_cast<const float*>(args.inputs[0]);
    float* dx = static_cast<float*>(args.outputs[0]);
    const Taps &td = geo.taps[0], &th = geo.taps[1], &tw = geo.taps[2];
    const auto& in = geo.in;
    const auto& out = geo.out;
    ParallelRange(
        geo.planes, work,
        [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            const float* gp = dy + c * plane_out;
            float* xp = dx + c * plane_in;
            std::fill(xp, xp + plane_in, 0.0f);
            for (int64_t od = 0; od < out[0]; ++od) {
              for (int64_t oh = 0; oh < out[1]; ++oh) {
                for (int64_t ow = 0; ow < out[2]; ++ow) {
                  const float g = gp[(od * out[1] + oh) * out[2] + ow];
                  for (int a = 0; a < td.n; ++a) {
                    const float wd = g * td.w[od * td.n + a];
                    float* xd = xp + td.idx[od * td.n + a] * in[1] * in[2];
                    for (int bb = 0; bb < th.n; ++bb) {
                      const float wh = wd * th.w[oh * th.n + bb];
                      float* xh = xd + th.idx[oh * th.n + bb] * in[2];
                      for (int cc = 0; cc < tw.n; ++cc)
                        xh[tw.idx[ow * tw.n + cc]] += wh * tw.w[ow * tw.n + cc];
                    }
                  }
                }
              }
            }
          }
        },
        1);
  });
}

TILLER_CPU_KERNEL("interp_grad", MakeInterpGrad, Signature("T -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
